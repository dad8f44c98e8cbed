"""This code against another checkout of it on the CPU, alternated (A B A B ...): the quick-start model's training
step (samples/s, the loop's hooks included) and evaluation (images/s, the quick-start's 1 scale + flip).

    python -m bench.ab_cpu --old /work/main --h5 DATA/train192.h5 --images DATA/images --ckpt RUN/last.pt

Each measurement is a fresh process started in the checkout measured (its own code imported), with the same
snippet, data and threads; the ratio new / old of each round is printed and the median ratio at the end. A busy
neighbour slows both sides alike within a round, so the ratios drift far less than the figures
(docs/benchmarks.md#device-side-steps-and-evaluation-on-the-cpu).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from simplepose.utils.errors import cli_main

REPO = Path(__file__).resolve().parents[1]

SNIPPET = r"""
import json, sys, time
from pathlib import Path
import cv2, torch
from simplepose.config.config_file import load_config
a = json.loads(sys.argv[1])
out = {}
if a["what"] == "train":
    from simplepose.engine.trainer import Trainer
    cfg = load_config("config/quickstart.yaml", [f"data.train={a['h5']}", f"train.out_dir={a['out']}",
                      "train.val_every=0", "train.log_every=10", "train.epochs=1"])
    t = Trainer(cfg)
    p = t.position
    t.model.train()
    t.hooks.before_train(p)
    t.hooks.before_epoch(p)
    batches = t.batches.epoch(0, 0)
    loaded = [next(batches) for _ in range(a["steps"] + 2)]
    times = []
    for i, micro in enumerate(loaded):
        t.hooks.before_step(p)
        start = time.perf_counter()
        result = t.train_step(micro, 1e-3)
        p.step, p.global_step = p.step + 1, p.global_step + 1
        t.hooks.after_step(p, result)
        if i >= 2:
            times.append(time.perf_counter() - start)
    out["samples_per_s"] = cfg.train.batch_size * len(times) / sum(times)
else:
    from simplepose.evaluate.estimator import PoseEstimator
    est = PoseEstimator.from_checkpoint(a["ckpt"], device="cpu")
    files = sorted(Path(a["images"]).glob("*.jpg"))[: a["images_n"] + 1]
    images = [cv2.imread(str(f)) for f in files]
    est(images[0])
    start = time.perf_counter()
    for im in images[1:]:
        est(im)
    out["images_per_s"] = (len(images) - 1) / (time.perf_counter() - start)
print("RESULT " + json.dumps(out))
"""


def measure(root: Path, args: dict) -> float:
    env = dict(os.environ, PYTHONPATH=str(root))
    r = subprocess.run([sys.executable, "-c", SNIPPET, json.dumps(args)], cwd=root, env=env, capture_output=True,
                       text=True, timeout=1800)  # fmt: skip
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"measurement in {root} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return next(iter(json.loads(line[7:]).values()))


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--old", required=True, help="the other checkout (A)")
    p.add_argument("--new", default=str(REPO), help="this checkout (B)")
    p.add_argument("--h5", required=True, help="training file of the quick start (input 192)")
    p.add_argument("--images", required=True, help="folder of .jpg images to evaluate")
    p.add_argument("--ckpt", required=True, help="a quick-start checkpoint")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--eval-images", type=int, default=20)
    p.add_argument("--what", nargs="+", default=["train", "eval"], choices=["train", "eval"])
    p.add_argument("--out", default="/tmp/simplepose_ab", help="where each measurement gets a new run folder")
    a = p.parse_args(argv)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    roots = {"old": Path(a.old).resolve(), "new": Path(a.new).resolve()}
    for what in a.what:
        unit = "samples/s" if what == "train" else "images/s"
        ratios = []
        for r in range(a.rounds):
            figures = {}
            for side, root in roots.items():  # A B, A B, ...
                out = tempfile.mkdtemp(prefix=f"{side}_{r}_", dir=a.out)  # a training never reuses a run's folder
                args = {"what": what, "h5": a.h5, "out": out, "steps": a.steps, "ckpt": a.ckpt,
                        "images": a.images, "images_n": a.eval_images}  # fmt: skip
                figures[side] = measure(root, args)
            ratios.append(figures["new"] / figures["old"])
            print(f"{what} round {r}: old {figures['old']:.2f} {unit}, new {figures['new']:.2f} {unit}, "
                  f"new/old {ratios[-1]:.3f}", flush=True)  # fmt: skip
        print(f"{what}: median new/old {statistics.median(ratios):.3f} over {len(ratios)} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
