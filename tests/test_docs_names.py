"""Every name the docs cite exists: each ``package.module.name`` reference in README.md and docs/*.md (code spans,
code blocks and prose alike, ``python -m package.module`` included) names a module of this project that imports, and
an attribute of it (a function, a class, a class's method); each ``package/.../module.py`` path names a file.

A reference starts with one of the project's packages. ``data.NAME`` is also how the config's ``data`` section is
written (``data.skeleton``, ``data.num_workers``): a field of ``config.schema.DataConfig`` there is a config key, not a
module. File names (``config.yaml``) are not references."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

from simplepose.config.schema import DataConfig
from simplepose.utils.paths import REPO_ROOT

PACKAGES = ("utils", "config", "codec", "data", "models", "checkpoint", "evaluate", "engine", "bench", "tests")
REFERENCE = re.compile(r"(?<![\w./-])((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+)")
FILE_SUFFIXES = {"yaml", "yml", "json", "jsonl", "py", "md", "pt", "pth", "h5", "txt", "png", "jpg", "onnx", "csv"}
CONFIG_KEYS = {"data": {f.name for f in dataclasses.fields(DataConfig)}}
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(PACKAGES) + r")/[\w/]*\w\.py)\b")


def doc_files(root: Path = REPO_ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def references(text: str) -> set[str]:
    """The dotted project names ``text`` cites, file names and config keys left out."""
    found = set()
    for name in REFERENCE.findall(text):
        parts = name.split(".")
        if parts[-1] in FILE_SUFFIXES or parts[1] in CONFIG_KEYS.get(parts[0], ()):
            continue
        found.add(name)
    return found


def unresolved(name: str) -> str | None:
    """Why ``name`` does not resolve (None when it does): the longest prefix that imports as a module, then each
    further part an attribute of the one before."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError as e:
            if e.name is not None and not ".".join(parts[:n]).startswith(e.name):
                raise  # the module exists but an import inside it fails: a real error, not a wrong name
            continue
        for i, attr in enumerate(parts[n:], n):
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
    assert unresolved("models.weights.load_initial_weights") == "models.weights has no 'load_initial_weights'"
    assert unresolved("evaluate.runtime.cubic_weights") == "evaluate has no 'runtime'"
    assert PATH.findall("`codec/decoder/peaks.py`, cache/data/x.py, engine/trainer.py:80") == [
        "codec/decoder/peaks.py", "engine/trainer.py"]  # fmt: skip
