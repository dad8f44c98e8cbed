"""The quick start end to end (`python train.py` with no --config), on a reduced schedule."""

import json
import shutil
import subprocess
import sys

import pytest

from simplepose.config.config_file import load_config
from simplepose.engine import run
from simplepose.engine.curves import plot_run
from simplepose.engine.run import QUICKSTART_PRESET
from simplepose.engine.run_folder import run_files
from tests.paths import REPO_ROOT


@pytest.mark.slow
def test_quickstart_smoke_end_to_end(tmp_path):
    synthetic, run = tmp_path / "synthetic", tmp_path / "run"
    size = load_config(QUICKSTART_PRESET).data.input_size
    args = [
        f"data.synthetic_dir={synthetic}", "data.synthetic_images=20", f"train.out_dir={run}",
        "train.epochs=2", "train.max_steps_per_epoch=2", "train.batch_size=2", "data.num_workers=0",
        "model.stacks=1", "loss.stack_weights=[1]", "model.inp_dim=16", "model.increase=8", "model.head_channels=16",
        "eval.max_images=3", "train.val_every=1",
    ]  # fmt: skip
    r = subprocess.run([sys.executable, "train.py", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    for name in ("last.pt", "best.pt", "metrics.jsonl", "config.yaml", "curves.png", "predictions.png"):
        assert (run / name).is_file(), name
    assert (synthetic / f"train{size}.h5").is_file() and (synthetic / f"val{size}.h5").is_file()
    assert "validation AP" in r.stdout and str(run / "last.pt") in r.stdout
    kinds = [json.loads(line)["kind"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert kinds.count("epoch") == 2 and kinds.count("val") == 2
    assert plot_run(run, tmp_path / "again.png").stat().st_size > 10_000

    # Every file of the run marks the folder as a run's: the same command again is refused, changing nothing.
    assert {p.name for p in run_files(run)} == {p.name for p in run.iterdir()}
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    r = subprocess.run([sys.executable, "train.py", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    [refusal] = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert "train.resume=auto" in refusal and f"train.out_dir={tmp_path / 'run-2'}" in refusal
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before

    # Running again reuses the cached synthetic data; resuming the finished run trains and writes nothing, saying so.
    mtime = (synthetic / f"train{size}.h5").stat().st_mtime
    r = subprocess.run([sys.executable, "train.py", *args, "train.resume=auto"], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert (synthetic / f"train{size}.h5").stat().st_mtime == mtime
    assert f"{run / 'last.pt'} holds a finished run: 2 epochs done" in r.stdout and "nothing was trained" in r.stdout
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before

    # ... and makes no synthetic data first: the finished run is found before the quick start's data is made.
    shutil.rmtree(synthetic)
    r = subprocess.run([sys.executable, "train.py", *args, "train.resume=auto"], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0 and "holds a finished run" in r.stdout, r.stderr[-3000:]
    assert not synthetic.exists()


def test_the_quick_start_keeps_a_data_path_the_user_gave(monkeypatch):
    """The quick start fills in its synthetic data's paths, but a data.* path given on the command line stays (and is
    then checked before the first step), never replaced in silence by the synthetic set's."""
    made = {
        "data.train": "cache/synthetic/train.h5",
        "data.val": "cache/synthetic/val.h5",
        "data.val_images": "cache/synthetic/images",
        "data.val_annotations": "cache/synthetic/annotations/person_keypoints_val.json",
    }
    monkeypatch.setattr(run, "quickstart_overrides", lambda cfg, rank: made)
    cfg = load_config(QUICKSTART_PRESET, ["data.val_annotations=/missing.json"])
    resolved = run.with_quickstart_data(cfg, quickstart=True, rank=0)
    assert resolved.data.val_annotations == "/missing.json"
    assert (resolved.data.train, resolved.data.val, resolved.data.val_images) == (
        made["data.train"],
        made["data.val"],
        made["data.val_images"],
    )
