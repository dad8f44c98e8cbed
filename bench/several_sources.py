"""Two datasets of different keypoints trained together, beside each trained alone for the same steps: a synthetic
COCO-skeleton set and a synthetic CrowdPose-skeleton set, on the quick start's network and COCO's skeleton.

    python -m bench.several_sources [--images 300] [--epochs 6] [--steps 40] [--seeds 0] [--figures persons|drawn]
                                    [--out DIR] [key=value ...]

Three runs per seed (``python train.py`` with ``data.train_sources``): COCO alone, CrowdPose alone (its head and
neck dropped, COCO's nose, eyes and ears unlabelled: left out of its loss), both together with equal weights. The
CrowdPose-skeleton set (``make_sources``) is by default other synthetic people annotated in CrowdPose's keypoints, so
that a name means the same point in both sets, as in the real datasets. Every
run takes the same optimiser steps (``--epochs`` x ``--steps``). Each source's AP is measured on its own synthetic
validation split, CrowdPose's mapped onto COCO's names (``data.annotation_mapping``), so it counts the 12 keypoints
the two share. Prints one row per source: AP alone, AP together, and each run's wall time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from pathlib import Path

from bench.quickstart_runs import cpu_name, last_validation, train
from simplepose.config.config_file import load_config
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.annotation_mapping import map_annotation_file
from simplepose.data.conversion import Source, convert
from simplepose.data.quickstart_data import prepare_synthetic_data
from simplepose.data.sources import source_names
from simplepose.engine.run import QUICKSTART_PRESET
from simplepose.utils.errors import cli_main
from simplepose.utils.io import atomic_write_text
from tests.paths import REPO_ROOT

SKELETONS = ("coco", "crowdpose")


def mapped_file(source: Path, skeleton: str, out: Path) -> Path:
    """``source`` (COCO-format annotations) in ``skeleton``'s keypoint names at ``out`` (made once)."""
    if not out.is_file():
        data, _ = map_annotation_file(json.loads(source.read_text()), load_skeleton(skeleton), str(source))
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, json.dumps(data))
    return out


def make_sources(root: Path, images: int, figures: str) -> dict[str, dict[str, str]]:
    """The two synthetic sets under ``root`` (made once): each one's training file and its validation images and
    annotations in COCO's keypoint names. The CrowdPose-skeleton set: ``persons``, other synthetic people (another
    seed) annotated in CrowdPose's 14 keypoints (their head top and neck unlabelled: these people have none marked;
    nose, eyes and ears not annotated), or ``drawn``, CrowdPose figures drawn from its limb graph (whose shapes
    differ from the people's)."""
    sets = {}
    coco = load_config(QUICKSTART_PRESET, [f"data.synthetic_images={images}"]).data
    made = prepare_synthetic_data(dataclasses.replace(coco, synthetic_dir=str(root / "coco")))
    sets["coco"] = {
        "train": made["data.train"],
        "images": made["data.val_images"],
        "annotations": made["data.val_annotations"],
    }
    if figures == "drawn":
        crowd = dataclasses.replace(coco, skeleton="crowdpose", synthetic_dir=str(root / "crowdpose_drawn"))
        made = prepare_synthetic_data(crowd)
        val = mapped_file(Path(made["data.val_annotations"]), "coco", root / "crowdpose_drawn_val_coco.json")
        sets["crowdpose"] = {"train": made["data.train"], "images": made["data.val_images"], "annotations": str(val)}
        return sets
    others = prepare_synthetic_data(dataclasses.replace(coco, synthetic_seed=1, synthetic_dir=str(root / "persons1")))
    folder = root / "crowdpose_persons"
    train_json = mapped_file(
        Path(others["data.val_annotations"]).with_name("person_keypoints_train.json"),
        "crowdpose",
        folder / "train.json",
    )
    val = mapped_file(
        mapped_file(Path(others["data.val_annotations"]), "crowdpose", folder / "val.json"),
        "coco",
        folder / "val_coco.json",
    )
    h5 = folder / f"train{coco.input_size}.h5"
    if not h5.is_file():
        convert(
            [Source(Path(others["data.val_images"]), train_json)],
            h5,
            coco.input_size,
            progress=False,
            skeleton="crowdpose",
        )
    sets["crowdpose"] = {"train": str(h5), "images": others["data.val_images"], "annotations": str(val)}
    return sets


def source_overrides(sets: dict[str, dict[str, str]], names: list[str]) -> list[str]:
    def listed(key: str) -> str:
        return "[" + ",".join(sets[n][key] for n in names) + "]"

    return [
        f"data.train_sources={listed('train')}",
        f"data.source_val_images={listed('images')}",
        f"data.source_val_annotations={listed('annotations')}",
        f"data.source_weights=[{','.join('1' for _ in names)}]",
    ]


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.several_sources", description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=300, help="synthetic images per skeleton")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--steps", type=int, default=40, help="optimiser steps per epoch, in every run")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--figures", choices=["persons", "drawn"], default="persons", help="the CrowdPose-skeleton set")
    p.add_argument("--out", default="runs/several_sources", help="folder of the runs (one sub-folder each)")
    p.add_argument("overrides", nargs="*", help="key=value settings for every run")
    args = p.parse_args(argv)
    out = Path(args.out).resolve()
    sets = make_sources(REPO_ROOT / "cache" / "synthetic_sources", args.images, args.figures)
    schedule = [
        f"train.epochs={args.epochs}",
        f"train.max_steps_per_epoch={args.steps}",
        f"train.val_every={args.epochs}",
        f"train.lr_step_epochs={max(args.epochs - 1, 1)}",
        "data.skeleton=coco",
    ]
    print(f"{cpu_name()}; {args.epochs} x {args.steps} steps per run", flush=True)
    ap: dict[tuple[str, str], list[float]] = {}
    minutes: dict[str, list[float]] = {}
    runs = {"coco": ["coco"], "crowdpose": ["crowdpose"], "together": list(SKELETONS)}
    for seed in args.seeds:
        for run, members in runs.items():
            folder = out / f"{run}_seed{seed}"
            settings = [*schedule, *source_overrides(sets, members), f"train.seed={seed}", *args.overrides]
            seconds = train(folder, settings)
            figures = last_validation(folder)
            # the figures' names are the run's own sources' (data.sources.source_names)
            names = dict(zip(members, source_names([sets[m]["train"] for m in members])))
            for member in members:
                ap.setdefault((run, member), []).append(figures[f"{names[member]}/AP"])
            if seconds:
                minutes.setdefault(run, []).append(seconds / 60)
            shown = ", ".join(f"{m} AP {figures[f'{names[m]}/AP']:.3f}" for m in members)
            print(f"{run:10s} seed {seed}: {shown} ({seconds / 60:.1f} min)" if seconds else f"{run} seed {seed}: kept")

    def cell(values: list[float]) -> str:
        return f"{statistics.mean(values):.3f}" + (f" +- {statistics.stdev(values):.3f}" if len(values) > 1 else "")

    print(f"\n| source | AP alone | AP together ({len(args.seeds)} seed(s)) | min alone | min together |")
    print("|---|---|---|---|---|")
    for member in SKELETONS:
        alone, together = ap[(member, member)], ap[("together", member)]
        wall = [cell(minutes[r]) if minutes.get(r) else "-" for r in (member, "together")]
        print(f"| {member} | {cell(alone)} | {cell(together)} | {wall[0]} | {wall[1]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
