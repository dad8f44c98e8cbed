"""The training recipes side by side on the quick start: the original's (Adam, step decay), with weight averaging,
with AdamW and the cosine schedule, and all of them, over several seeds, alternated on one machine.

    python -m bench.recipes [--seeds 0 1 2] [--recipes original ema adamw_cosine all] [--out DIR] [key=value ...]

Each run is ``python train.py`` (the quick start: its synthetic data, made once and shared) with the recipe's
settings, ``train.seed=S`` and ``train.out_dir=OUT/RECIPE_seedS``, in the order seed 0 of every recipe, then seed 1,
... so that a slower or busier stretch of the machine falls on all of them. Prints one row per run (the last
validation's AP, which under train.ema is the average's, and the wall time), then per recipe the mean and spread
(sample standard deviation) of both. An existing run folder is kept and read again, so an interrupted comparison
continues where it stopped; the wall times of kept runs are not known again, and are left out.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from bench.quickstart_runs import cpu_name, last_validation, mean_spread, prepare_data, train
from simplepose.utils.errors import cli_main

# the quick start's own recipe is config/quickstart.yaml's; each entry changes only what it names
EMA = ["train.ema=0.99", "train.ema_warmup_steps=100"]
ADAMW_COSINE = ["train.optimizer=adamw", "train.weight_decay=0.05", "train.lr_schedule=cosine", "train.lr_floor=0.05"]
RECIPES: dict[str, list[str]] = {
    "original": ["train.optimizer=adam", "train.lr_schedule=step", "train.ema=0"],
    "ema": ["train.optimizer=adam", "train.lr_schedule=step", *EMA],
    "adamw_cosine": [*ADAMW_COSINE, "train.ema=0"],
    "all": [*ADAMW_COSINE, *EMA],
}


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.recipes", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    p.add_argument("--out", default="runs/recipes", help="folder of the runs (one sub-folder each)")
    p.add_argument("overrides", nargs="*", help="key=value settings for every run (e.g. train.epochs=3)")
    args = p.parse_args(argv)
    prepare_data(args.overrides)
    print(f"{cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}", flush=True)
    aps: dict[str, list[float]] = {name: [] for name in args.recipes}
    minutes: dict[str, list[float]] = {name: [] for name in args.recipes}
    for seed in args.seeds:
        for name in args.recipes:
            out = Path(args.out).resolve() / f"{name}_seed{seed}"
            seconds = train(out, [*RECIPES[name], f"train.seed={seed}", *args.overrides])
            ap = last_validation(out)["AP"]
            aps[name].append(ap)
            if seconds:
                minutes[name].append(seconds / 60)
            took = f"{seconds / 60:.1f} min" if seconds else "kept"
            print(f"{name:13s} seed {seed}: AP {ap:.3f} ({took})", flush=True)
    print(f"\n| recipe | settings | AP (mean +- spread, {len(args.seeds)} seeds) | median | wall min |")
    print("|---|---|---|---|---|")
    for name in args.recipes:
        wall = mean_spread(minutes[name], 1) if minutes[name] else "-"
        median = statistics.median(aps[name])
        print(f"| {name} | `{' '.join(RECIPES[name])}` | {mean_spread(aps[name])} | {median:.3f} | {wall} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
