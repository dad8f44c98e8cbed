"""Does mixed precision cost accuracy? The quick start trained in float32 and in bf16 (and fp16 where the device
runs it) over several seeds, the runs alternated on one machine, each with its AP and its error diagnosis.

    python -m bench.precision_seeds [--seeds 0 1 2] [--precisions off bf16] [--out runs/precision_seeds] [key=value ...]

Each run is ``python train.py`` (the quick start: its synthetic data, made once and shared) with ``train.amp=P
train.seed=S train.out_dir=OUT/P_seedS``, in the order seed 0 float32, seed 0 bf16, seed 1 float32, ... so that a
slower or busier stretch of the machine falls on both. The last validation's results are diagnosed
(evaluate/metrics/diagnosis.py). Prints one row per run, then per precision the mean and the spread (sample standard
deviation) of the AP, the keypoint error shares and the AP each correction gains; the difference of the means is
worth reading only beside the seeds' own spread. An existing run folder is kept (its figures are read again), so an
interrupted comparison continues where it stopped.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from bench.quickstart_runs import last_validation, mean_spread, prepare_data, train
from simplepose.config.config_file import load_config
from simplepose.engine.run import QUICKSTART_PRESET
from simplepose.evaluate.metrics.diagnosis import ERROR_TYPES, diagnose
from simplepose.utils.errors import cli_main
from tests.paths import REPO_ROOT

NAMES = {"off": "float32", "bf16": "bf16", "fp16": "fp16"}


def figures(out: Path, annotations: Path) -> dict:
    """The last validation's AP and the diagnosis of its results."""
    last = last_validation(out)
    found = diagnose(annotations, out / f"val_results_epoch{last['epoch']}.json")
    total = max(sum(found.keypoint_errors.values()), 1)
    return {
        "AP": last["AP"],
        "shares": {k: v / total for k, v in found.keypoint_errors.items()},
        "gains": found.ap_gains,
    }


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.precision_seeds", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--precisions", nargs="+", default=["off", "bf16"], choices=sorted(NAMES))
    p.add_argument("--out", default="runs/precision_seeds", help="folder of the runs (one sub-folder each)")
    p.add_argument("overrides", nargs="*", help="key=value settings for every run (e.g. train.epochs=3)")
    args = p.parse_args(argv)
    prepare_data(args.overrides)
    synthetic = Path(load_config(QUICKSTART_PRESET, args.overrides).data.synthetic_dir)
    annotations = (REPO_ROOT / synthetic if not synthetic.is_absolute() else synthetic) / "annotations"
    annotations = annotations / "person_keypoints_val.json"  # train.py runs in the repository's root
    rows: dict[str, list[dict]] = {precision: [] for precision in args.precisions}
    for seed in args.seeds:
        for precision in args.precisions:
            out = Path(args.out).resolve() / f"{precision}_seed{seed}"
            seconds = train(out, [f"train.amp={precision}", f"train.seed={seed}", *args.overrides])
            row = figures(out, annotations)
            rows[precision].append(row)
            shares = ", ".join(f"{k} {v:.1%}" for k, v in row["shares"].items())
            took = f"{seconds / 60:.1f} min" if seconds else "kept"
            print(f"{NAMES[precision]:8s} seed {seed}: AP {row['AP']:.3f} ({took}); keypoints: {shares}", flush=True)
    print()
    for precision, found in rows.items():
        print(f"{NAMES[precision]:8s} AP {mean_spread([r['AP'] for r in found])} over {len(found)} seeds")
        print("          keypoints: " + ", ".join(
            f"{k} {mean_spread([r['shares'][k] for r in found])}" for k in ERROR_TYPES))  # fmt: skip
        print("          AP gained correcting: " + ", ".join(
            f"{k} {mean_spread([r['gains'][k] for r in found])}" for k in found[0]["gains"]))  # fmt: skip
    if "off" in rows and len(rows) > 1:
        for precision in [p for p in rows if p != "off"]:
            diffs = [b["AP"] - a["AP"] for a, b in zip(rows["off"], rows[precision])]
            print(f"{NAMES[precision]} - float32, same seed: {', '.join(f'{d:+.3f}' for d in diffs)} "
                  f"(mean {statistics.mean(diffs):+.3f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
