"""The README's "Your own keypoints" commands, taken from the README itself and run in order in a scratch folder:
the same commands and arguments, with only the sizes cut (fewer images, 64 px, the tiny network, a dozen steps)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from simplepose import train
from simplepose.data import coco_to_hdf5, synthetic
from simplepose.evaluate import coco_eval
from tests.helpers import FAINT_MAPS, SHORT_RUN
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.usefixtures("one_thread")
# What each command gets on top of the README's arguments (later arguments win), so that it runs in seconds.
SMALLER = {
    "data.synthetic": ["--num-images", "12"],
    "data.coco_to_hdf5": ["--input-size", "64"],
    "train.py": [
        "data.input_size=64",
        "eval.boxsize=64",
        "model.inp_dim=16",
        "model.increase=8",
        "model.head_channels=16",
        "model.se_reduction=4",
        "train.batch_size=2",
        "train.amp=off",
        *SHORT_RUN,
    ],  # fmt: skip
    "evaluate.coco_eval": ["eval.max_images=2", *FAINT_MAPS],
}
RUNNERS = {"data.synthetic": synthetic.main, "data.coco_to_hdf5": coco_to_hdf5.main, "train.py": train.main,
           "evaluate.coco_eval": coco_eval.main}  # fmt: skip


def readme_commands(section: str) -> list[list[str]]:
    """The commands of the first bash block of the README section ``section``: continuations joined, comments
    dropped, each split into words."""
    text = (REPO_ROOT / "README.md").read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", body, re.S).group(1)
    return [shlex.split(line, comments=True) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


OUTPUT_OPTIONS = ("--out", "--json", "--diagnose")


def readme_outputs() -> list[str]:
    """What the README's commands name as outputs (``--out``, ``--json``, ``--diagnose``, ``train.out_dir=``, the
    target of ``cp``), for the commands run from the checkout (not those of the installed package, ``simplepose.*``,
    meant for any folder)."""
    text = (REPO_ROOT / "README.md").read_text()
    outputs = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if not words or any(w.startswith("simplepose.") for w in words):
                continue
            outputs += [words[i + 1] for i, w in enumerate(words[:-1]) if w in OUTPUT_OPTIONS]
            outputs += [w.split("=", 1)[1] for w in words if w.startswith("train.out_dir=")]
            outputs += [words[-1]] if words[0] == "cp" else []
    return outputs


def test_the_readme_commands_write_only_where_git_ignores():
    """Nothing a README command writes shows in ``git status``: every output is ignored (runs/, *.h5, ...) or
    outside the checkout."""
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    outputs = readme_outputs()
    assert "runs/val_results.json" in outputs and "runs/synth_video" in outputs
    inside = [o for o in outputs if not Path(o).is_absolute()]
    r = subprocess.run(["git", "check-ignore", "--no-index", *inside], cwd=REPO_ROOT, capture_output=True, text=True)
    assert sorted(r.stdout.split()) == sorted(inside)


def test_the_readme_commands_for_your_own_keypoints_run(tmp_path, monkeypatch, capsys):
    commands = readme_commands("Your own keypoints")
    assert [c[:3] for c in commands] == [
        ["mkdir", "-p", "runs"], ["cp", "config/skeletons/quadruped6.yaml", "runs/my_keypoints.yaml"],
        ["python", "-m", "data.synthetic"], ["python", "-m", "data.coco_to_hdf5"],
        ["python", "train.py", "--config"], ["python", "-m", "evaluate.coco_eval"],
    ]  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config").symlink_to(REPO_ROOT / "config")  # the commands are run from the repository root
    for words in commands:
        if words[0] == "mkdir":
            Path(words[-1]).mkdir(parents=True, exist_ok=True)
            continue
        if words[0] == "cp":
            shutil.copy(words[1], words[2])
            continue
        what = words[2] if words[1] == "-m" else words[1]
        args = words[3:] if words[1] == "-m" else words[2:]
        assert RUNNERS[what]([*args, *SMALLER[what]]) == 0, what
    printed = capsys.readouterr().out
    assert "AP " in printed and (tmp_path / "runs/my_keypoints/last.pt").is_file()
    results = json.loads((tmp_path / "runs/my_keypoints/results.json").read_text())
    assert results and all(len(r["keypoints"]) == 3 * 6 for r in results)  # the skeleton file's 6 keypoints
