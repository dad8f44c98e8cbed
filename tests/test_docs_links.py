"""Every link into the docs resolves: relative links of the Markdown files (README.md, CHANGELOG.md, docs/*.md) and
the ``docs/NAME.md#anchor`` references in code comments, presets and error messages name a file that exists and,
with an anchor, a heading of that file (GitHub's heading ids) or an explicit ``<a id=...>``."""

from __future__ import annotations

import re
from pathlib import Path

from tests.paths import REPO_ROOT

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
# A reference to a doc in code or presets: docs/design.md, docs/evaluation.md#person-assembly, README.md#tests
CODE_REFERENCE = re.compile(r"\b((?:docs/[\w.-]+|README|CHANGELOG)\.md)(#[\w-]+)?")
CODE_SUFFIXES = (".py", ".yaml", ".yml", ".toml", ".cfg", ".sh")


def slug(heading: str) -> str:
    """GitHub's id of a heading: the rendered text lower-cased, punctuation other than '-' and '_' dropped, each
    space a '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading renders as its text
    text = re.sub(r"[`*]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """The ids a Markdown file defines: one per heading (repeats get -1, -2, ... as on GitHub), and <a id=...>."""
    found: set[str] = set(EXPLICIT_ANCHOR.findall(markdown))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def markdown_links(markdown: str) -> list[str]:
    """Targets of the links outside code blocks and code spans."""
    return LINK.findall(INLINE_CODE.sub("", FENCE.sub("", markdown)))


def broken_links(doc: Path, root: Path) -> list[str]:
    """Relative links of ``doc`` whose file or anchor does not exist."""
    broken = []
    for target in markdown_links(doc.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        where = f"{doc.relative_to(root)}: ({target})"
        if not file.exists():
            broken.append(f"{where}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(f"{where}: no heading #{anchor} in {file.relative_to(root)}")
    return broken


def broken_code_references(file: Path, root: Path) -> list[str]:
    """``docs/NAME.md#anchor`` mentions in a code or preset file that name no file or no heading of it."""
    broken = []
    for number, line in enumerate(file.read_text().splitlines(), 1):
        for path, anchor in CODE_REFERENCE.findall(line):
            doc = root / path
            where = f"{file.relative_to(root)}:{number}: {path}{anchor}"
            if not doc.is_file():
                broken.append(f"{where}: no file {path}")
            elif anchor and anchor[1:] not in anchors(doc.read_text()):
                broken.append(f"{where}: no heading {anchor} in {path}")
    return broken


def shipped_docs(root: Path) -> list[Path]:
    return [p for p in (root / "README.md", root / "CHANGELOG.md") if p.is_file()] + sorted(root.glob("docs/*.md"))


def code_files(root: Path) -> list[Path]:
    """Code, presets and scripts of the repository, without this file (its examples name docs that do not exist)."""
    skip = {"runs", "cache", "node_modules"}
    return sorted(p for p in root.rglob("*") if p.suffix in CODE_SUFFIXES and p.is_file() and p != Path(__file__)
                  and not any(part.startswith(".") or part in skip for part in p.relative_to(root).parts))  # fmt: skip


def test_slug_follows_githubs_heading_ids():
    assert slug("Results without annotations (test-dev)") == "results-without-annotations-test-dev"
    assert slug("GPU (NVIDIA H200)") == "gpu-nvidia-h200"
    assert slug("Reading other datasets' files") == "reading-other-datasets-files"
    assert slug("Training engine: loop, hooks, checkpoint") == "training-engine-loop-hooks-checkpoint"
    assert slug("`eval.peak_score`, the keypoint score") == "evalpeak_score-the-keypoint-score"
    assert anchors('# A\n## A\n```\n# not a heading\n```\n<a id="old-name"></a>\n') == {"a", "a-1", "old-name"}


def test_the_checker_finds_broken_links_and_references(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n## Peaks\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/guide.md#peaks) [self](#readme) `[code](nowhere.md)`\n# README\n"
        "[gone](docs/missing.md) [bad anchor](docs/guide.md#limbs)\n```\n[in a block](nowhere.md)\n```\n"
    )
    (tmp_path / "mod.py").write_text("# see docs/guide.md#peaks\n# see docs/guide.md#limbs and docs/other.md\n")
    assert broken_links(tmp_path / "README.md", tmp_path) == [
        "README.md: (docs/missing.md): no file docs/missing.md",
        "README.md: (docs/guide.md#limbs): no heading #limbs in docs/guide.md",
    ]
    assert broken_code_references(tmp_path / "mod.py", tmp_path) == [
        "mod.py:2: docs/guide.md#limbs: no heading #limbs in docs/guide.md",
        "mod.py:2: docs/other.md: no file docs/other.md",
    ]


def test_every_relative_link_of_the_docs_resolves():
    docs = shipped_docs(REPO_ROOT)
    assert {"README.md", "design.md", "benchmarks.md"} <= {p.name for p in docs}
    assert [b for doc in docs for b in broken_links(doc, REPO_ROOT)] == []


def test_every_docs_reference_in_code_and_presets_resolves():
    files = code_files(REPO_ROOT)
    assert any(p.name == "schema.py" for p in files)
    assert [b for file in files for b in broken_code_references(file, REPO_ROOT)] == []
