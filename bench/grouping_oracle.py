"""The grouping's ceiling: decoders scored on the ground truth's own target maps, on any annotation file.

    python -m bench.grouping_oracle --annotations bench/data/crowdpose_val.json --skeleton crowdpose \
        [--subsets all crowded300 even odd] [--limit N] [--decoders original before before_full default] \
        [--cache DIR] [key=value ...]

No pixel is read: the oracle draws each image's training targets (evaluate/inference/oracle.py) for every test scale and
its mirror, on a blank picture of the image's size, so the whole test-time path (resize, flip fusion, scale
averaging, decoding) runs as with a perfect network. Every point lost is lost by peaks, limb scoring and assembly.

Per decoder and subset it prints AP (and AP easy / medium / hard where the skeleton is CrowdPose's), the diagnosis'
swaps and misses (matched keypoints, and the AP each would add if corrected), the people lost at OKS 0.5 by cause
(merged: a detection reaches 0.5 with them but was matched to another person; missed: none does; each with the AP it
costs, the AP gained with those people left out of the ground truth), the detections that match no person, and
the decoding speed (images/s of ``decode_people`` alone, one thread, maps made beforehand). Subsets: ``all``,
``crowdedN`` (the N images of highest ``crowdIndex``, CrowdPose's crowding measure; else the most people per image),
``even`` / ``odd`` (image ids; tune on even, report odd).

Decoders (``--decoders``; each a set of ``eval.*`` values over the configured ones):
  original     the original's grouping (image-size grid, centroid refinement with its x/y swap, 2 parts, window mean)
  before       this project's default until the crowd decoder (docs/benchmarks.md#grouping-in-crowds)
  before_full  the same at the image's own size (decode_height=0)
  before_60    the default until issue 60: partial people joined without the limb maps' word, each peak in one person
  default      config/schema.py's defaults as they are now
  default_auto the same on the finest test scale's grid (decode_height=auto)
  join_person  the default, a join refused where the person channel along it averages below 0.5 (eval.join_person)
  len_rate_4   the default, a connection joining only when shorter than 4 (not 16) times the people's longest limb
  len_rate_2   the same, 2 times

``--jobs N`` makes and decodes the maps of N images at once (the decoding figures are then per process, slower
where the processes share cores).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import multiprocessing
import time
from pathlib import Path

import numpy as np
import torch

from bench.map_cache import cached
from simplepose.codec.decoder.decode import decode_people
from simplepose.codec.person import Person
from simplepose.config.config_file import add_config_arguments, config_from_args
from simplepose.config.schema import EvalConfig
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_file import skeleton_of
from simplepose.evaluate.inference.multiscale import multiscale_maps_batch
from simplepose.evaluate.inference.oracle import annotation_oracle
from simplepose.evaluate.inference.plan import InferencePlan
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.evaluate.metrics.coco_results import coco_results
from simplepose.evaluate.metrics.diagnosis import diagnose
from simplepose.evaluate.metrics.keypoint_stats import keypoint_stats
from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.io import atomic_write_text
from simplepose.utils.progress_bar import progress_bar

ORIGINAL = dict(
    decode_height=0,
    refine_mode="centroid",
    refine_xy_swap_bug=True,
    min_parts=2,
    peak_score="window_mean",
    max_peaks=0,
    grouping="limb_order",
    one_per_plateau=False,
    join_fragments=0.0,
)
BEFORE = {  # the original's grouping with the former defaults' grid, refinement, filter and peak score
    **ORIGINAL,
    "decode_height": 192,
    "refine_mode": "quadratic",
    "refine_xy_swap_bug": False,
    "min_parts": 1,
    "peak_score": "input_window",
    "max_peaks": 100,
}
BEFORE_60 = {"join_limbs": 0.0, "share_peaks": 0.0}  # the default until issue 60: joins without the maps' word
DECODERS = {
    "original": ORIGINAL,
    "before": BEFORE,
    "before_full": {**BEFORE, "decode_height": 0},
    "before_60": BEFORE_60,
    "default": {},
    "default_auto": {"decode_height": "auto"},
    "join_person": {"join_person": 0.5},
    "len_rate_4": {"len_rate": 4.0},
    "len_rate_2": {"len_rate": 2.0},
}


def decoder_config(base: EvalConfig, name: str) -> EvalConfig:
    """``base`` with the decoder ``name``'s values (module docstring); only fields ``EvalConfig`` has are set."""
    known = {f.name for f in dataclasses.fields(EvalConfig)}
    return dataclasses.replace(base, **{k: v for k, v in DECODERS[name].items() if k in known})


def subset_ids(coco, name: str) -> list[int]:
    """The sorted image ids of subset ``name`` (module docstring)."""
    ids = sorted(coco.imgs)
    if name == "all":
        return ids
    if name in ("even", "odd"):
        return [i for i in ids if i % 2 == (name == "odd")]
    if name.startswith("crowded") and name[7:].isdigit():
        n = int(name[7:])
        if all("crowdIndex" in coco.imgs[i] for i in ids):
            key = {i: float(coco.imgs[i]["crowdIndex"]) for i in ids}
        else:
            key = {i: len(coco.getAnnIds(imgIds=[i], iscrowd=False)) for i in ids}
        return sorted(sorted(ids, key=lambda i: (-key[i], i))[:n])
    raise UserError(f"unknown subset {name!r}: all, even, odd or crowdedN (e.g. crowded300)")


@dataclasses.dataclass
class Row:
    decoder: str
    subset: str
    images: int
    stats: dict[str, float]
    swaps: float  # fraction of matched keypoints
    misses: float
    swap_gain: float  # AP gained if the swaps were corrected alone
    miss_gain: float
    detections: int
    unmatched: int  # detections matching no person
    people: int  # labelled people, not crowds
    merged: int  # people lost at OKS 0.5 to a detection matched to another person
    missed: int  # people lost at OKS 0.5 that no detection reaches
    merged_cost: float  # AP gained with the merged people left out of the ground truth
    missed_cost: float
    images_per_s: float
    lost: list[dict]  # each person lost at OKS 0.5 (``Diagnosis.lost``): in --json only


def oracle_maps(coco, image_id: int, cfg, skeleton: Skeleton, plans: dict[int, InferencePlan]) -> dict[int, tuple]:
    """{decode height: (maps, scale)} of one image's oracle, on a blank picture of its size, under each height's
    plan (``plans``: made once per run)."""
    info = coco.imgs[image_id]
    blank = np.zeros((int(info["height"]), int(info["width"]), 3), np.uint8)
    oracle = cached(annotation_oracle(coco, cfg.targets, skeleton))
    cpu = torch.device("cpu")
    return {h: multiscale_maps_batch([blank], plan, oracle, cpu, keys=[image_id])[0] for h, plan in plans.items()}


def decode_all(coco, ids: list[int], cfg, skeleton: Skeleton, decoders: list[str], progress: bool, jobs: int = 1):
    """{decoder: [people of each image]} and {decoder: seconds spent decoding}."""
    global _WORK
    configs = {d: decoder_config(cfg.eval, d) for d in decoders}
    heights = dict.fromkeys(c.decode_height for c in configs.values())
    plans = {h: InferencePlan.of(skeleton, dataclasses.replace(cfg.eval, decode_height=h)) for h in heights}
    _WORK = (coco, cfg, skeleton, configs, plans)
    people: dict[str, list[list[Person]]] = {d: [] for d in decoders}
    seconds = dict.fromkeys(decoders, 0.0)
    with multiprocessing.get_context("fork").Pool(jobs) if jobs > 1 else contextlib.nullcontext() as pool:
        results = pool.imap(_decode_one, ids, chunksize=2) if pool is not None else map(_decode_one, ids)
        for one in progress_bar(results, total=len(ids), desc="oracle", unit="img", disable=not progress):
            for d, (found, spent) in one.items():
                people[d].append(found)
                seconds[d] += spent
    return people, seconds


_WORK = None  # (coco, cfg, skeleton, {decoder: EvalConfig}, {height: plan}) of decode_all, read by its workers


def _decode_one(image_id: int) -> dict[str, tuple[list[Person], float]]:
    coco, cfg, skeleton, configs, plans = _WORK
    torch.set_num_threads(1)
    maps = oracle_maps(coco, image_id, cfg, skeleton, plans)
    out = {}
    for d, c in configs.items():
        m, scale = maps[c.decode_height]
        start = time.perf_counter()
        found = decode_people(m, c, scale, skeleton=skeleton)
        out[d] = (found, time.perf_counter() - start)
    return out


def score(coco, ids, people: list[list[Person]], skeleton: Skeleton) -> tuple[dict, dict]:
    results = coco_results(ids, people)
    stats, _ = keypoint_stats(coco, results, ids, skeleton)
    d = diagnose(coco, results, skeleton, ids)
    errors = d.keypoint_errors
    matched = max(sum(errors.values()), 1)
    diag = dict(
        swaps=errors.get("swap", 0) / matched,
        misses=errors.get("miss", 0) / matched,
        swap_gain=d.ap_alone.get("swap", 0.0) - d.ap["baseline"],
        miss_gain=d.ap_alone.get("miss", 0.0) - d.ap["baseline"],
        detections=d.detections,
        unmatched=d.background["detections_matching_no_person"],
        people=d.people,
        merged=d.lost_people["merged"],
        missed=d.lost_people["missed"],
        merged_cost=d.lost_ap_cost["merged"],
        missed_cost=d.lost_ap_cost["missed"],
        lost=d.lost,
    )
    return stats, diag


def table(rows: list[Row], crowdpose: bool) -> str:
    head = ["decoder", "subset", "images", "AP"]
    head += ["AP easy", "AP medium", "AP hard"] if crowdpose else ["AP50", "AP75"]
    head += ["swaps (AP if fixed)", "misses (AP if fixed)", "people merged (AP cost)", "people missed (AP cost)"]
    head += ["detections matching no one", "decoding img/s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        s = r.stats
        figures = [s["AP"]] + ([s["AP_easy"], s["AP_medium"], s["AP_hard"]] if crowdpose else [s["AP50"], s["AP75"]])
        # pycocotools gives -1 for a group without people (no hard image among the 100 least crowded): "-"
        cells = [r.decoder, r.subset, str(r.images)] + [f"{v:.3f}" if v >= 0 else "-" for v in figures]
        cells += [
            f"{100 * r.swaps:.1f} % (+{r.swap_gain:.3f})",
            f"{100 * r.misses:.1f} % (+{r.miss_gain:.3f})",
            f"{r.merged} of {r.people} ({r.merged_cost:.3f})",
            f"{r.missed} of {r.people} ({r.missed_cost:.3f})",
            f"{r.unmatched} of {r.detections}",
            f"{r.images_per_s:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.grouping_oracle", description=__doc__.split("\n\n")[0])
    p.add_argument("--annotations", type=Path, required=True, help="COCO-format keypoint annotations (any skeleton)")
    p.add_argument("--skeleton", default="coco", help="the keypoint set: a name (coco, crowdpose) or a YAML file")
    p.add_argument("--subsets", nargs="+", default=["all"], help="all, even, odd, crowdedN")
    p.add_argument("--decoders", nargs="+", default=list(DECODERS), choices=list(DECODERS))
    p.add_argument("--limit", type=int, default=0, help="first N images of the union of the subsets (0: all)")
    p.add_argument("--jobs", type=int, default=1, help="images made and decoded at once (processes)")
    p.add_argument("--json", type=Path, help="also write the rows there (a new file; never overwritten)")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    add_config_arguments(p)
    return p


def report(args: argparse.Namespace, cfg, skeleton: Skeleton) -> None:
    """Decode, score and print the table (and write --json)."""
    truth = load_ground_truth(args.annotations, skeleton, cfg.eval)  # eval.skip_bad: bad images left out
    coco = truth.coco
    subsets = {name: subset_ids(coco, name) for name in args.subsets}
    union = sorted(set().union(*subsets.values()) & set(truth.images))[: args.limit or None]
    kept = set(union)
    subsets = {name: [i for i in ids if i in kept] for name, ids in subsets.items()}
    people, seconds = decode_all(coco, union, cfg, skeleton, args.decoders, args.progress, args.jobs)
    index = {image_id: n for n, image_id in enumerate(union)}
    rows = []
    for name, ids in subsets.items():
        for d in args.decoders:
            stats, diag = score(coco, ids, [people[d][index[i]] for i in ids], skeleton)
            rows.append(Row(d, name, len(ids), stats, images_per_s=len(union) / max(seconds[d], 1e-9), **diag))
    e = cfg.eval
    print(f"{args.annotations}: {len(union)} images, scales {e.scales}, flip {e.flip}, boxsize {e.boxsize}")
    print(table(rows, skeleton.scored_as_crowdpose))
    if args.json is not None:
        atomic_write_text(args.json, json.dumps([dataclasses.asdict(r) for r in rows], indent=1))


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.overrides = [f"data.skeleton={args.skeleton}", *args.overrides]
    cfg = config_from_args(args)
    skeleton = skeleton_of(cfg)
    if not args.annotations.is_file():
        raise UserError(f"annotation file {args.annotations} not found", file=args.annotations)
    if args.json is not None and args.json.exists():
        raise UserError(f"{args.json} exists: give a new --json path", file=args.json)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the oracle's maps are small: one thread per image (per worker process with --jobs)
    try:
        report(args, cfg, skeleton)
    finally:
        torch.set_num_threads(threads)  # main also runs inside other processes (the tests)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
