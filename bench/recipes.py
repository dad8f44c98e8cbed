"""The training recipes side by side on the quick start: the original's (Adam, step decay), with weight averaging,
with AdamW and the cosine schedule, and all of them, over several seeds, alternated on one machine.

    python -m bench.recipes [--seeds 0 1 2] [--recipes original original_wide ema ...] [--out DIR] [key=value ...]
    python -m bench.recipes --speed [--rounds 3] [--samples 320]     # training speed alone, alternated

Each run is ``python train.py`` (the quick start: its synthetic data, made once and shared) with the recipe's
settings, ``train.seed=S`` and ``train.out_dir=OUT/RECIPE_seedS``, in the order seed 0 of every recipe, then seed 1,
... so that a slower or busier stretch of the machine falls on all of them. Prints one row per run (the last
validation's AP, which under train.ema is the average's, and the wall time), then per recipe the mean and spread
(sample standard deviation) of both. An existing run folder is kept and read again, so an interrupted comparison
continues where it stopped; the wall times of kept runs are not known again, and are left out.

Whole runs are minutes apart, so another process on the machine can slow one and not the next. ``--speed`` measures
what a recipe costs per sample instead: each recipe trains ``--samples`` samples (one epoch cut short, no
validation) in a fresh process, recipes alternated for ``--rounds`` rounds; it prints each round's samples/s (the
loop's own figure: data loading, step and hooks) and each recipe's median as a ratio to the first recipe's.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch

from bench.quickstart_runs import cpu_name, last_validation, mean_spread, prepare_data, read_records, train
from simplepose.config.config_file import load_config
from simplepose.engine.run import QUICKSTART_PRESET
from simplepose.utils.errors import cli_main

# the quick start's own recipe is config/quickstart.yaml's; each entry changes only what it names
EMA = ["train.ema=0.99", "train.ema_warmup_steps=100"]
ADAMW_COSINE = ["train.optimizer=adamw", "train.weight_decay=0.05", "train.lr_schedule=cosine", "train.lr_floor=0.05"]
BATCH_SIZE = "train.batch_size=8"  # the quick start's batch until 2026-12-05
# the original's target widths (sigma 9, limb sigma 7 input pixels, set for 512 input), the quick start's until
# 2026-12-05; its preset now halves them for its 192 input (docs/benchmarks.md#training-recipes)
WIDE_TARGETS = ["targets.sigma=9", "targets.limb_sigma=7"]
ORIGINAL = ["train.optimizer=adam", "train.lr_schedule=step", "train.ema=0"]
RECIPES: dict[str, list[str]] = {
    "original": [*ORIGINAL, BATCH_SIZE],
    "original_wide": [*ORIGINAL, BATCH_SIZE, *WIDE_TARGETS],
    # measured with the original's widths, and kept so
    "ema": ["train.optimizer=adam", "train.lr_schedule=step", *EMA, BATCH_SIZE, *WIDE_TARGETS],
    "adamw_cosine": [*ADAMW_COSINE, "train.ema=0", BATCH_SIZE, *WIDE_TARGETS],
    "all": [*ADAMW_COSINE, *EMA, BATCH_SIZE, *WIDE_TARGETS],
    # the original's recipe at half the batch: twice the optimiser steps for the same samples
    "batch4": [*ORIGINAL, "train.batch_size=4", *WIDE_TARGETS],
}


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.recipes", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    p.add_argument("--out", default="runs/recipes", help="folder of the runs (one sub-folder each)")
    p.add_argument("--speed", action="store_true", help="samples/s of each recipe alone, alternated (no AP)")
    p.add_argument("--rounds", type=int, default=3, help="--speed: rounds of every recipe")
    p.add_argument("--samples", type=int, default=320, help="--speed: samples trained per measurement")
    p.add_argument("overrides", nargs="*", help="key=value settings for every run (e.g. train.epochs=3)")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.samples < 1:
        p.error(f"--rounds and --samples take 1 or more (given {args.rounds} and {args.samples})")
    prepare_data(args.overrides)
    print(f"{cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}", flush=True)
    if args.speed:
        return speed(args)
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


def speed(args: argparse.Namespace) -> int:
    """Samples/s of each recipe's training loop, the recipes alternated round by round."""
    rates: dict[str, list[float]] = {name: [] for name in args.recipes}
    with tempfile.TemporaryDirectory(prefix="recipes_speed_") as tmp:
        for round_ in range(args.rounds):
            for name in args.recipes:
                cfg = load_config(QUICKSTART_PRESET, [*RECIPES[name], *args.overrides])
                steps = max(1, args.samples // cfg.train.batch_size)
                out = Path(tmp) / f"{name}_{round_}"
                run = [*RECIPES[name], "train.epochs=1", f"train.max_steps_per_epoch={steps}", "train.val_every=0"]
                train(out, [*run, *args.overrides])
                epoch = [r for r in read_records(out) if r["kind"] == "epoch"][-1]
                rates[name].append(epoch["samples_per_s"])
                print(f"round {round_}: {name:13s} {epoch['samples_per_s']:.2f} samples/s", flush=True)
    first = statistics.median(rates[args.recipes[0]])
    print(f"\n| recipe | samples/s (median of {args.rounds}) | against {args.recipes[0]} |\n|---|---|---|")
    for name in args.recipes:
        median = statistics.median(rates[name])
        print(f"| {name} | {median:.2f} | {median / first:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
