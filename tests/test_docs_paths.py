"""Every path a documented command reads is there for a user: each path on a ``python``/``torchrun`` command line of
README.md and docs/*.md (code blocks and code spans) that the command reads, not writes, is

* in a fresh clone (a file git tracks, or a folder of them),
* made by a command of the same page (``--out DIR`` of an earlier line, or what ``python train.py`` and
  ``python -m tests.fetch_coco_sample`` write: MADE_BY),
* a placeholder (``DIR``, ``FILE.h5``, ``/path/to/x.json``, ``...``),
* or a file of the user's own whose first folder or name the page's prose introduces (``coco/val2017``: "COCO
  downloaded to coco/"), which says where it comes from.

A path above the clone (``../shared/...``) is never one of these, nor one inside a folder of the repository that a
fresh clone does not have (``bench/data/x.json``): a user's clone has neither."""

from __future__ import annotations

import re
import shlex
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT
from tests.test_docs_names import doc_files

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:python|torchrun|cp)\s")
# flags and keys whose value a command writes, not reads
OUTPUT_FLAGS = {"--out", "--json", "--diagnose"}
OUTPUT_KEYS = {"train.out_dir"}
FILE_SUFFIX = re.compile(r"\.(json|h5|pt|pth|yaml|yml|mp4|jpg|png|onnx|jsonl|txt)$")
# what the documented setup commands write: the folder, and the command that must be on the same page
MADE_BY = {
    "runs": "python train.py",
    "cache": "python train.py",
    "tests/coco_sample/images": "python -m tests.fetch_coco_sample",
}


@cache
def tracked(root: Path = REPO_ROOT) -> frozenset[str]:
    """Every file git tracks under ``root`` and every folder above one: what a fresh clone has."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: a fresh clone's files are unknown")
    files = out.split()
    return frozenset(files) | {str(Path(f).parents[i]) for f in files for i in range(len(Path(f).parents) - 1)}


def commands(markdown: str) -> list[str]:
    """The command lines of a page: lines of code blocks that start with python/torchrun (continuation lines
    joined, comments dropped) and code spans that do."""
    found = []
    for block in FENCE.findall(markdown):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if COMMAND.match(line.strip()):
                found.append(line.strip().split(" #")[0])
    found += [s for s in SPAN.findall(FENCE.sub("", markdown)) if COMMAND.match(s)]
    return found


def is_path(token: str) -> bool:
    return ("/" in token or bool(FILE_SUFFIX.search(token))) and not token.startswith("-")


def paths_of(command: str) -> tuple[list[str], list[str]]:
    """(paths the command reads, paths it writes)."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    if tokens[0] == "cp":
        return tokens[1:-1], tokens[-1:]
    reads, writes = [], []
    after = None
    for token in tokens:
        if token in OUTPUT_FLAGS:
            after = "out"
            continue
        values = [token]
        if "=" in token and not token.startswith("-"):
            key, _, value = token.partition("=")
            values = [v for part in value.split(":") for v in part.split("=")]
            if key in OUTPUT_KEYS:
                writes += [v for v in values if is_path(v)]
                continue
        if after == "out":
            writes.append(token)
            after = None
            continue
        for alternative in (a for value in values for a in value.split("|")):
            if is_path(alternative):
                reads.append(alternative)
    return reads, writes


def is_placeholder(path: str) -> bool:
    return path.startswith("/path/to/") or "..." in path or any(re.fullmatch(r"[A-Z_]+(\.\w+)?", part)
                                                                for part in path.split("/"))  # fmt: skip


def prose(markdown: str) -> str:
    """The page's words: without its command spans, and of its code blocks only the comments."""
    comments = "\n".join(re.findall(r"(?:^|\s)#\s(.*)$", "\n".join(FENCE.findall(markdown)), re.M))
    return SPAN.sub(lambda m: "" if COMMAND.match(m.group(1)) else m.group(0), FENCE.sub("", markdown)) + comments


def unavailable(path: str, markdown: str, made: list[str], have: frozenset[str]) -> str | None:
    """Why a user's clone cannot give ``path`` to a command of ``markdown`` (None when it can)."""
    clean = path.strip("'\"").rstrip("/")
    if is_placeholder(clean):
        return None
    if clean.startswith("../"):
        return "above the clone"
    parts = Path(clean).parts
    globbed = Path(*[p for p in parts if "*" not in p]) if parts else Path()
    if str(globbed) in have:
        return None
    for folder, command in MADE_BY.items():
        if (clean + "/").startswith(folder + "/") and command in markdown:
            return None
    if any((clean + "/").startswith(out.rstrip("/") + "/") for out in made):
        return None
    if clean.startswith("/") or parts[0] not in {Path(f).parts[0] for f in have}:
        named = clean if clean.startswith("/") else parts[0]  # a user's folder, or an absolute path in full
        if re.search(r"(?<![\w./-])" + re.escape(named) + r"\b", prose(markdown)):
            return None
        return "not in a clone, and the page does not say where it comes from"
    return "not in a fresh clone"


def unavailable_paths(doc: Path, have: frozenset[str]) -> list[str]:
    markdown = doc.read_text(encoding="utf-8")
    bad, made = [], []
    for command in commands(markdown):
        reads, writes = paths_of(command)
        made += writes
        for path in reads:
            why = unavailable(path, markdown, made, have)
            if why is not None:
                bad.append(f"{doc.name}: {path} ({why}): {command[:80]}")
    return bad


def test_every_path_a_documented_command_reads_is_there():
    have = tracked()
    bad = [b for doc in doc_files() for b in unavailable_paths(doc, have)]
    assert not bad, "paths documented commands read that a user's clone does not have:\n  " + "\n  ".join(bad)


def test_the_checker_finds_paths_a_clone_lacks():
    have = frozenset({"tests", "tests/coco_sample", "tests/coco_sample/annotations/a.json", "bench", "bench/x.py"})
    page = (
        "COCO downloaded to coco/.\n```bash\npython -m tests.fetch_coco_sample\n"
        "python -m evaluate.coco_eval --images ../shared/data/coco_sample/images \\\n"
        "    --annotations tests/coco_sample/annotations/a.json --out results.json\n"
        "python -m bench.grouping_oracle --annotations bench/data/crowdpose_val.json --json bench/data/o.json\n"
        "python -m x --images coco/val2017 --h5 other/x.h5 --ckpt CKPT --annotations /path/to/crowdpose_val.json\n"
        "python -m x --images tests/coco_sample/images --diagnose DIR --results results.json\n```\n"
    )
    found = []
    for command in commands(page):
        reads, _ = paths_of(command)
        found += [(p, unavailable(p, page, ["results.json"], have)) for p in reads]
    assert found == [
        ("../shared/data/coco_sample/images", "above the clone"),
        ("tests/coco_sample/annotations/a.json", None),
        ("bench/data/crowdpose_val.json", "not in a fresh clone"),
        ("coco/val2017", None),
        ("other/x.h5", "not in a clone, and the page does not say where it comes from"),
        ("/path/to/crowdpose_val.json", None),
        ("tests/coco_sample/images", None),
        ("results.json", None),
    ]
