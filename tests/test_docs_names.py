"""Every name the docs cite exists: each ``package.module.name`` reference in README.md and docs/*.md (code spans,
code blocks and prose alike, ``python -m package.module`` included) names a module of this project that imports, and
an attribute of it (a function, a class, a class's method); each ``package/.../module.py`` path names a file.

A reference starts with one of the project's packages. ``data.NAME`` is also how the config's ``data`` section is
written (``data.skeleton``, ``data.num_workers``): a field of ``config.schema.DataConfig`` there is a config key, not a
module. File names (``config.yaml``) are not references."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import importlib
import re
from pathlib import Path

from simplepose.config.schema import DataConfig
from tests.paths import REPO_ROOT

PACKAGES = ("utils", "config", "codec", "data", "models", "checkpoint", "evaluate", "engine", "bench", "tests")
SUBPACKAGES = PACKAGES[:-2]  # simplepose.<folder>; bench/ and tests/ are the checkout's own
REFERENCE = re.compile(r"(?<![\w./-])((?:simplepose\.)?(?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+)")
FILE_SUFFIXES = {"yaml", "yml", "json", "jsonl", "py", "md", "pt", "pth", "h5", "txt", "png", "jpg", "onnx", "csv"}
CONFIG_KEYS = {"data": {f.name for f in dataclasses.fields(DataConfig)}}
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(PACKAGES) + r")/[\w/]*\w\.py)\b")


def doc_files(root: Path = REPO_ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def references(text: str) -> set[str]:
    """The dotted project names ``text`` cites, file names and config keys left out."""
    found = set()
    for name in REFERENCE.findall(text):
        parts = name.removeprefix("simplepose.").split(".")
        if parts[-1] in FILE_SUFFIXES or parts[1] in CONFIG_KEYS.get(parts[0], ()):
            continue
        found.add(name)
    return found


def unresolved(name: str) -> str | None:
    """Why ``name`` does not resolve (None when it does): the longest prefix that imports as a module, then each
    further part an attribute of the one before."""
    parts = name.split(".")
    if parts[0] in SUBPACKAGES:  # the docs name the folders as run from the checkout: evaluate.coco_eval
        parts = ["simplepose", *parts]
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError as e:
            if e.name is not None and not ".".join(parts[:n]).startswith(e.name):
                raise  # the module exists but an import inside it fails: a real error, not a wrong name
            continue
        for i, attr in enumerate(parts[n:], n):
            if not hasattr(obj, attr) and attr in getattr(obj, "__annotations__", {}):  # a field without a default
                return None
            if not hasattr(obj, attr):
                return f"{'.'.join(parts[:i])} has no {attr!r}"
            obj = getattr(obj, attr)
        return None
    return f"no module {parts[0]}"


def test_every_cited_name_exists():
    bad = []
    for doc in doc_files():
        for name in sorted(references(doc.read_text(encoding="utf-8"))):
            why = unresolved(name)
            if why is not None:
                bad.append(f"{doc.relative_to(REPO_ROOT)}: {name} ({why})")
    assert not bad, "names the docs cite that do not exist:\n  " + "\n  ".join(bad)


def test_every_cited_source_file_exists():
    bad = []
    for doc in doc_files():
        for path in sorted(set(PATH.findall(doc.read_text(encoding="utf-8")))):
            if not (REPO_ROOT / path).is_file():
                bad.append(f"{doc.relative_to(REPO_ROOT)}: {path}")
    assert not bad, "source files the docs cite that do not exist:\n  " + "\n  ".join(bad)


def test_references_are_found_and_checked():
    text = (
        "`models.weights.load_state`, `python -m evaluate.coco_eval`, data.skeleton=coco, `config.yaml`,"
        " torch.utils.data.DataLoader, runs/data.x, `codec.pose_codec.PoseCodec.decode(maps)`."
    )
    assert references(text) == {"models.weights.load_state", "evaluate.coco_eval",
                                "codec.pose_codec.PoseCodec.decode"}  # fmt: skip
    assert all(unresolved(name) is None for name in references(text))
    assert (
        unresolved("models.weights.load_initial_weights") == "simplepose.models.weights has no 'load_initial_weights'"
    )
    assert unresolved("evaluate.runtime.cubic_weights") == "simplepose.evaluate has no 'runtime'"
    assert references("`simplepose.evaluate.coco_eval.main`") == {"simplepose.evaluate.coco_eval.main"}
    assert unresolved("simplepose.evaluate.coco_eval.main") is None
    stale = "simplepose.evaluate.coco_eval.CHANNEL_FLIP"
    assert unresolved(stale) == "simplepose.evaluate.coco_eval has no 'CHANNEL_FLIP'"
    assert PATH.findall("`codec/decoder/peaks.py`, cache/data/x.py, engine/trainer.py:80") == [
        "codec/decoder/peaks.py", "engine/trainer.py"]  # fmt: skip


# ------------------------------------------------------------------------------------- names in code spans

SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
DOC_SPAN = re.compile(r"``([^`\n]+)``")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_NAME = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\(.*\))*")
SOURCE_FOLDERS = ("", *PACKAGES)
# this file and its neighbours cite stale names on purpose, as examples the checks must catch
CHECKERS = {"test_docs_names.py", "test_docs_paths.py", "test_docs_links.py"}
# names in code spans that are not this project's: other libraries' classes, environment variables, CPU features
EXTERNAL = {
    "COCOeval", "COCOeval_faster", "Path", "PIL", "BackendCompilerFailed", "None", "TYPE_CHECKING",  # libraries
    "CUDA_VISIBLE_DEVICES", "GOMP_SPINCOUNT", "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "ONEDNN_MAX_CPU_ISA", "PATH",
    "TORCHELASTIC_RESTART_COUNT", "HOST",  # environment variables, a host name to fill in
    "AVX2", "AVX512_CORE_BF16", "amx_bf16", "amx_int8", "amx_tile", "lscpu",  # CPU features, the command listing them
    "hourglass_inp_dim", "image_size",  # the original code's names
    "get_type_result", "atomicwrites",  # the CrowdPose tools' function, a library not used
    "h_box",  # a symbol of a formula
} | set(dir(builtins))  # fmt: skip


def source_files(root: Path = REPO_ROOT) -> list[Path]:
    """The project's Python files: the package's, the launchers, bench/ and tests/ (the docs checkers left out)."""
    files = sorted(root.glob("*.py"))
    for package in PACKAGES:
        files += sorted((root / package).rglob("*.py"))
    return [f for f in files if f.name not in CHECKERS]


@dataclasses.dataclass
class NameIndex:
    """What the project's code defines: top-level names (classes, functions, constants) with their modules, each
    class's members (methods, fields, attributes set on ``self``, a project base class's members), and every word
    of the code and presets (for the lower-case names the docs cite: functions, keys, fields)."""

    modules: dict[str, set[str]]
    members: dict[str, set[str]]
    bases: dict[str, set[str]]
    words: set[str]

    def class_has(self, name: str, attr: str, seen: frozenset[str] = frozenset()) -> bool:
        if attr in self.members.get(name, ()):
            return True
        for module in self.modules.get(name, ()):  # an external base class's attribute (nn.Module.forward ...)
            try:
                obj = getattr(importlib.import_module(module), name, None)
            except ImportError:
                obj = None
            if obj is not None and hasattr(obj, attr):
                return True
        return any(self.class_has(base, attr, seen | {name}) for base in self.bases.get(name, ()) if base not in seen)


def module_name(path: Path, root: Path = REPO_ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts if parts and parts[0] in ("bench", "tests") else ["simplepose", *parts])


@functools.cache
def name_index(root: Path = REPO_ROOT) -> NameIndex:
    index = NameIndex({}, {}, {}, set())
    for path in source_files(root):
        text = path.read_text(encoding="utf-8")
        index.words |= set(re.findall(r"\w+", text))
        module = module_name(path, root)
        for node in ast.parse(text).body:
            names = []
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                index.modules.setdefault(name, set()).add(module)
            if isinstance(node, ast.ClassDef):
                members = index.members.setdefault(node.name, set())
                index.bases.setdefault(node.name, set()).update(ast.unparse(b).split(".")[-1] for b in node.bases)
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        members.add(sub.name)
                    elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                        members.add(sub.target.id)
                    elif isinstance(sub, ast.Assign):
                        members.update(t.id for t in sub.targets if isinstance(t, ast.Name))
                members.update(sub.attr for sub in ast.walk(node) if isinstance(sub, ast.Attribute)
                               and isinstance(sub.value, ast.Name) and sub.value.id == "self")  # fmt: skip
    for path in sorted(root.rglob("*.yaml")):
        index.words |= set(re.findall(r"\w+", path.read_text(encoding="utf-8")))
    return index


def code_names(spans: list[str]) -> set[str]:
    """The code names of code spans: ``Class.method``, ``function(args)``, ``CONSTANT``, ``key.field``; file names,
    commands and names under a package (checked by ``unresolved``) left out."""
    found = set()
    for span in spans:
        match = CODE_NAME.fullmatch(span.strip()) or CODE_NAME.match(span.strip())
        if match is None or (match.end() < len(span.strip()) and span.strip()[match.end()] != "("):
            continue
        name = match.group(1)
        parts = name.split(".")
        if parts[-1] in FILE_SUFFIXES or parts[0] in (*PACKAGES, "simplepose") or len(parts[0]) == 1:
            continue
        found.add(name)
    return found


def unknown_code_name(name: str, index: NameIndex) -> str | None:
    """Why ``name`` names nothing of the project (None when it does). ``Class.attr`` and ``CONSTANT`` must be defined
    (the attribute a member of the class); lower-case names must be words of the code or presets."""
    head, *attrs = name.split(".")
    if head in EXTERNAL:
        return None
    if head[0].isupper():
        if head not in index.modules:
            return f"no class or constant {head} in the code"
        if attrs and head in index.members and not index.class_has(head, attrs[0]):
            return f"{head} has no {attrs[0]!r}"
        return None
    missing = [part for part in name.split(".") if part not in index.words]
    return f"{', '.join(missing)} not in the code or presets" if missing else None


def doc_spans(markdown: str) -> list[str]:
    return SPAN.findall(FENCE.sub("", markdown))


def docstring_spans(path: Path) -> list[str]:
    """The ````code```` spans of a Python file's docstrings."""
    spans = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            spans += DOC_SPAN.findall(ast.get_docstring(node) or "")
    return spans


def test_every_name_in_a_code_span_of_the_docs_exists():
    index, bad = name_index(), []
    for doc in doc_files():
        for name in sorted(code_names(doc_spans(doc.read_text(encoding="utf-8")))):
            why = unknown_code_name(name, index)
            if why is not None:
                bad.append(f"{doc.relative_to(REPO_ROOT)}: `{name}` ({why})")
    assert not bad, "code names the docs cite that the code does not have:\n  " + "\n  ".join(bad)


def test_every_class_or_project_name_a_docstring_cites_exists():
    """Docstrings are docs too: their ``Class.attr`` and ``package.module.name`` spans name what exists."""
    index, bad = name_index(), []
    for path in source_files():
        spans = docstring_spans(path)
        for name in sorted(code_names(spans)):
            project_class = name.split(".")[0] in index.members  # other libraries' names are theirs to keep
            why = unknown_code_name(name, index) if project_class else None
            if why is not None:
                bad.append(f"{path.relative_to(REPO_ROOT)}: ``{name}`` ({why})")
        for name in sorted(references(" ".join(f"`{s}`" for s in spans))):
            why = unresolved(name)
            if why is not None:
                bad.append(f"{path.relative_to(REPO_ROOT)}: ``{name}`` ({why})")
    assert not bad, "names docstrings cite that do not exist:\n  " + "\n  ".join(bad)


def test_stale_code_names_are_caught():
    index = name_index()
    page = "`CHANNEL_FLIP`, `PoseEstimator.people`, `PoseEstimator.stream(source)`, `fuse_flip`, `no_such_helper()`"
    assert {name: unknown_code_name(name, index) for name in code_names(doc_spans(page))} == {
        "CHANNEL_FLIP": "no class or constant CHANNEL_FLIP in the code",
        "PoseEstimator.people": "PoseEstimator has no 'people'",
        "PoseEstimator.stream": None,
        "fuse_flip": None,
        "no_such_helper": "no_such_helper not in the code or presets",
    }


# ------------------------------------------------------------------- the design guide's flow, README's Layout


def flow_stages(markdown: str) -> list[str]:
    """The modules of the data-flow diagram (the design guide's first code block with arrows): each line's path,
    on its own or after ``->`` or ``|``."""
    block = next((b for b in re.findall(r"^```\n(.*?)^```", markdown, re.S | re.M) if "\n  -> " in b), "")
    return re.findall(r"^(?:\s*(?:->|\|)\s+)?([\w/]+\.py)\b", block, re.M)


def is_command(path: Path) -> bool:
    return '__name__ == "__main__"' in path.read_text(encoding="utf-8")


def test_the_design_guides_data_flow_runs_through_library_modules():
    """The flow follows the data through the modules that hold it; a command (a module run with ``python -m``, which
    nothing imports) is not a stage of it."""
    stages = flow_stages((REPO_ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    assert {"data/dataset.py", "codec/decoder/decode.py"} <= set(stages)
    missing = [s for s in stages if not (REPO_ROOT / s).is_file()]
    commands = [s for s in stages if s not in missing and is_command(REPO_ROOT / s)]
    assert not missing and not commands, f"not files: {missing}; commands, not stages: {commands}"
    assert flow_stages("```\na/x.py  one\n  -> b/y.py  two\n  | c/z.py  three\n```\n") == ["a/x.py", "b/y.py", "c/z.py"]


def layout_block(readme: str) -> str:
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"^```\n(.*?)^```", section, re.S | re.M).group(1)


def unlisted_packages(block: str, root: Path = REPO_ROOT) -> list[str]:
    """Folders of ``root`` with Python files (packages, bench/, tests/) and their subfolders that README's Layout
    does not list: a top folder as ``name/`` at a line's start, a subfolder as ``sub/`` in its parent's lines."""
    entries: dict[str, str] = {}
    for line in block.splitlines():
        match = re.match(r"([\w]+)/\s", line)
        if match:
            current = match.group(1)
        if line.strip() and (match or line.startswith(" ")):
            entries[current] = entries.get(current, "") + line
    missing = []
    for folder in sorted(p.parent for p in root.glob("*/**/*.py")):
        parts = folder.relative_to(root).parts
        if any(part.startswith((".", "_")) or part in ("build", "runs", "cache") for part in parts):
            continue
        if parts[0] not in entries:
            missing.append(f"{parts[0]}/")
        elif len(parts) > 1 and not re.search(r"(?<![\w/])" + re.escape("/".join(parts[1:])) + "/", entries[parts[0]]):
            missing.append("/".join(parts) + "/")
    return sorted(set(missing))


def test_readme_layout_lists_every_package():
    assert unlisted_packages(layout_block((REPO_ROOT / "README.md").read_text(encoding="utf-8"))) == []


def test_the_layout_check_finds_a_missing_package(tmp_path):
    for folder in ("codec/decoder", "data", "evaluate/metrics"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "x.py").write_text("")
    block = "data/   things\nevaluate/   metrics/ (figures)\n            and more\n"
    assert unlisted_packages(block, tmp_path) == ["codec/"]
    assert unlisted_packages(block + "codec/  the codec\n", tmp_path) == ["codec/decoder/"]
