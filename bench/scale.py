"""How the data path's cost grows with the dataset: conversion, random reading, evaluation at COCO's sizes.

    python -m bench.scale                                   # a short run: 250 and 1,000 images, 500 evaluated
    python -m bench.scale --sizes 1000 4000 16000 --eval-images 5000   # the figures of the docs

1. Conversion (``data.conversion.convert``, each size in a fresh process) of a train2017-shaped annotation set made of
   the real COCO sample's pictures reused under new ids (``bench.scale_data``; no image is written): seconds, ms per
   image, CPU ms per image (all processes, and the converting one's share), the CPU seconds per wall second (how
   many cores were busy), peak resident memory of the converting process (and with its workers), HDF5 bytes per
   stored image. Straight lines through the sizes are extrapolated to train2017 (118,287 images), as measured and
   for 2 free cores.
2. Reading: the Dataset's samples/s over random indices (DataLoader with 0, 1 and 2 workers) of the sample's own
   file, of the largest file, and of the largest file with its pages evicted from the page cache first
   (``posix_fadvise``: that file alone, so that the workers' libraries stay cached), taken in turn, each the best of
   ``--rounds``.
3. Evaluation of ``--eval-images`` images with ``--eval-people`` results each (a fresh process each): the
   ``evaluate.coco_eval --results`` path (ground truth, results file read and checked, gathering, COCO evaluation)
   and the in-training validation path (people to results, gathering, results JSON written, COCO evaluation), each
   stage's seconds and peak resident memory.

The pictures are the sample's 27 files read again and again, so they come from the page cache: a first conversion
of train2017 also reads its 18 GB from disk. On a shared machine the figures move from minute to minute: compare
ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from bench.scale_data import (
    TRAIN2017_IMAGES,
    TRAIN2017_WITH_PEOPLE,
    VAL2017_IMAGES,
    results_for,
    sample_annotations,
    scaled_annotations,
)
from bench.timing import loader_rate
from simplepose.config.config_file import load_config
from simplepose.data.conversion import Source, convert
from simplepose.data.dataset import SimplePoseDataset
from simplepose.utils.errors import UserError, cli_main
from tests.paths import COCO_SAMPLE_ANNOTATIONS, REPO_ROOT, coco_sample_dir


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[250, 1000], help="images per set (default 250 1000)")
    p.add_argument("--eval-images", type=int, default=500, help="images evaluated (val2017: 5000; default 500)")
    p.add_argument("--eval-people", type=int, default=20, help="results per evaluated image (default 20)")
    p.add_argument("--samples", type=int, default=32, help="samples read per loader measurement (default 32)")
    p.add_argument("--rounds", type=int, default=2, help="alternated rounds of the loader measurement (default 2)")
    p.add_argument("--input-size", type=int, default=256, help="data.input_size of the files (default 256)")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2], help="loader workers (default 0 1 2)")
    p.add_argument(
        "--convert-workers", type=int, nargs="+", default=[0, 2], help="conversion worker processes (default 0 2)"
    )
    p.add_argument("--parts", nargs="+", choices=["convert", "loader", "eval"], default=["convert", "loader", "eval"])
    p.add_argument("--workdir", type=Path, help="folder for the files made (default: a temporary one, removed)")
    return p


def check_arguments(args: argparse.Namespace) -> None:
    for name in ("eval_images", "eval_people", "samples", "rounds"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if min(args.sizes) < 1:
        raise UserError(f"--sizes must be at least 1 image each, got {min(args.sizes)}")
    for name in ("workers", "convert_workers"):
        if min(getattr(args, name)) < 0:
            raise UserError(f"--{name.replace('_', '-')} must be 0 or more, got {min(getattr(args, name))}")


# ----------------------------------------------------------------------------------------------------------- children
def _child(code: str, *argv: str) -> dict:
    """Run ``code`` (which prints one JSON line last) in a fresh interpreter of this tree; its parsed last line."""
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


_CONVERT = """
import json, resource, sys, time
from pathlib import Path
from bench.peak_memory import PeakSampler, max_resident_mb
from simplepose.data.conversion import Source, convert
images, annotations, out, size, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
t0, c0 = time.perf_counter(), time.process_time()
with PeakSampler(0.01, tree=True).stage() as tree:
    settings = convert([Source(Path(images), Path(annotations))], out, size, progress=False, workers=workers)
wall = time.perf_counter() - t0
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
main_cpu = time.process_time() - c0
print(json.dumps({"wall": wall, "cpu": main_cpu + kids.ru_utime + kids.ru_stime, "main_cpu": main_cpu,
                  "peak_mb": max_resident_mb(), "tree_peak_mb": tree.peak,
                  "counts": settings["counts"]}))
"""


def convert_sizes(sample: Path, sizes: list[int], input_size: int, workers: list[int], work: Path) -> list[dict]:
    """Each size's annotation set written, converted in a fresh process with each number of ``workers`` (in turn,
    so that their ratio is taken at the same moments), measured; the rows, by size then workers."""
    base = sample_annotations(sample / COCO_SAMPLE_ANNOTATIONS)
    rows = []
    for n in sizes:
        ann = work / f"train_{n}.json"
        ann.write_text(json.dumps(scaled_annotations(base, n)))
        for w in workers:
            out = work / f"train_{n}_{w}.h5"
            out.unlink(missing_ok=True)
            row = _child(_CONVERT, str(sample / "images"), str(ann), str(out), str(input_size), str(w))
            row |= {"images": n, "workers": w, "json_mb": ann.stat().st_size / 1e6, "h5_bytes": out.stat().st_size}
            rows.append(row | {"h5": str(out)})
            print(conversion_row(row), flush=True)
            if w != workers[-1]:
                out.unlink()
    return rows


CONVERSION_COLUMNS = (
    ("images", 7),
    ("JSON MB", 8),
    ("stored", 7),
    ("workers", 7),
    ("seconds", 8),
    ("ms/image", 9),
    ("CPU ms/image", 12),
    ("of which main", 13),
    ("cores busy", 10),
    ("peak MB", 8),
    ("with workers", 12),
    ("HDF5 MB", 8),
    ("kB/stored", 9),
)


def conversion_header() -> str:
    return " ".join(f"{name:>{width}}" for name, width in CONVERSION_COLUMNS)


def conversion_row(r: dict) -> str:
    stored = r["counts"]["images"]
    values = (
        r["images"],
        f"{r['json_mb']:.1f}",
        stored,
        r["workers"],
        f"{r['wall']:.2f}",
        f"{1000 * r['wall'] / r['images']:.3f}",
        f"{1000 * r['cpu'] / r['images']:.3f}",
        f"{1000 * r['main_cpu'] / r['images']:.3f}",
        f"{r['cpu'] / r['wall']:.2f}",
        f"{r['peak_mb']:.0f}",
        f"{r['tree_peak_mb']:.0f}",
        f"{r['h5_bytes'] / 1e6:.0f}",
        f"{r['h5_bytes'] / max(stored, 1) / 1e3:.1f}",
    )
    return " ".join(f"{v:>{width}}" for v, (_, width) in zip(values, CONVERSION_COLUMNS))


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through the points (a flat line through a single point)."""
    if len(set(xs)) < 2:
        return ys[0] / xs[0], 0.0
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(slope), float(intercept)


def extrapolation(rows: list[dict]) -> str:
    """The conversion's seconds (wall and CPU), peak memory and file size at train2017's size, from lines through the
    sizes (rows of one number of workers). "On 2 free cores": the CPU seconds spread over the cores the workers can
    use (at most 2), but never less than the converting process's own share (which is serial)."""
    n = [r["images"] for r in rows]
    s_slope, s_at0 = linear_fit(n, [r["wall"] for r in rows])
    c_slope, c_at0 = linear_fit(n, [r["cpu"] for r in rows])
    main_slope, _ = linear_fit(n, [r["main_cpu"] for r in rows])
    cores = 1 if rows[0]["workers"] == 0 else min(2, rows[0]["workers"])
    quiet = max(c_slope / cores, main_slope) * TRAIN2017_IMAGES + c_at0 / cores
    m_slope, m_at0 = linear_fit(n, [r["peak_mb"] for r in rows])
    b_slope, _ = linear_fit(n, [r["h5_bytes"] for r in rows])
    t = TRAIN2017_IMAGES
    return (
        f"{rows[0]['workers']} workers, lines through the sizes: {1000 * s_slope:.3f} ms per image + {s_at0:.1f} s, "
        f"CPU {1000 * c_slope:.3f} ms per image + {c_at0:.1f} s, peak {m_at0:.0f} MB + {1000 * m_slope:.2f} MB per "
        f"1,000 images;\n  extrapolated to train2017 ({t:,} images, {TRAIN2017_WITH_PEOPLE:,} with people): "
        f"{s_slope * t + s_at0:.0f} s as measured, {c_slope * t + c_at0:.0f} CPU s, on 2 free cores about "
        f"{quiet:.0f} s; peak {m_slope * t + m_at0:.0f} MB, HDF5 {b_slope * t / 1e9:.1f} GB"
    )


# ------------------------------------------------------------------------------------------------------------ loader
def evict_from_page_cache(path: Path) -> bool:
    """Drop the file's pages from the page cache (``posix_fadvise`` DONTNEED: this file alone, no root needed, other
    processes' caches kept); whether the system offers it."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def read_stage_us(ds: SimplePoseDataset, indices: list[int]) -> float:
    """Microseconds per sample of the dataset's reads alone (the sample's people, its image's JPEG bytes and mask
    runs; nothing decoded): the part of a sample that depends on the file."""
    t0 = time.perf_counter()
    for i in indices:
        image = int(ds.sample_image[i])
        ds.read_people(i)
        ds.read_jpeg(image)
        ds.read_masks(image, both=True)
    return (time.perf_counter() - t0) / len(indices) * 1e6


def loader_rates(large: Path, small: Path, input_size: int, args: argparse.Namespace) -> tuple[dict, str]:
    """{(reading, workers): best samples/s} over random indices: the sample's file, the largest file (cached), the
    largest file with its pages evicted from the page cache first, taken in turn; {(reading, "read"): the best
    ``read_stage_us``}; a note on the eviction."""
    cv2.setNumThreads(1)  # one thread here too, as in each worker (data.batching.worker_init_fn): 0 workers = one core
    torch.set_num_threads(1)
    cfg = load_config(None, [f"data.input_size={input_size}"])
    sets = {"sample": SimplePoseDataset(small, cfg, train=True), "largest": SimplePoseDataset(large, cfg, train=True)}
    readings = (("sample", "sample"), ("largest", "largest"), ("evicted", "largest"))
    rng = np.random.default_rng(0)
    best: dict[tuple[str, int], float] = {}
    evicted = True
    for workers in args.workers:
        for _ in range(args.rounds):
            for reading, name in readings:
                ds = sets[name]
                indices = rng.integers(0, len(ds), args.samples + max(1, workers)).tolist()
                if reading == "evicted":
                    evicted = evict_from_page_cache(large) and evicted
                rate = loader_rate(ds, workers, 1, args.samples, torch.device("cpu"), indices=indices)
                best[reading, workers] = max(best.get((reading, workers), 0.0), rate)
    for _ in range(args.rounds):
        for reading, name in readings:
            if reading == "evicted":
                evict_from_page_cache(large)
            indices = rng.integers(0, len(sets[name]), 10 * args.samples).tolist()
            us = read_stage_us(sets[name], indices)
            best[reading, "read"] = min(best.get((reading, "read"), us), us)
    note = "its pages evicted from the page cache first" if evicted else "NOT evicted (no posix_fadvise here)"
    return best, note


# -------------------------------------------------------------------------------------------------------- evaluation
def worker_ratios(rows: list[dict], workers: list[int]) -> str:
    """Each size's conversion seconds with the first number of workers over those with each other number."""
    parts = []
    for n in sorted({r["images"] for r in rows}):
        wall = {r["workers"]: r["wall"] for r in rows if r["images"] == n}
        parts += [f"{n} images {wall[workers[0]] / wall[w]:.2f}x with {w}" for w in workers[1:]]
    return f"speed-up over {workers[0]} workers (taken in turn): " + ", ".join(parts) if parts else ""


_EVAL = """
import json, sys
from pathlib import Path
import torch  # loaded by both paths (coco_eval, training): their starting memory
from bench.scale_eval import evaluation_stages
print(json.dumps(evaluation_stages(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))))
"""


def evaluate_sizes(sample: Path, images: int, people: int, work: Path) -> dict[str, list]:
    """Both evaluation paths on ``images`` val2017-shaped images (54 % with people, as train2017) with ``people``
    results each (every image, people or not: a network finds some everywhere)."""
    base = sample_annotations(sample / COCO_SAMPLE_ANNOTATIONS)
    truth = scaled_annotations(base, images)
    truth_file, results_file = work / f"val_{images}.json", work / f"results_{images}x{people}.json"
    truth_file.write_text(json.dumps(truth))
    results_file.write_text(json.dumps(results_for(truth, people, 17)))
    return {p: _child(_EVAL, p, str(truth_file), str(results_file), str(work)) for p in ("results", "training")}


# -------------------------------------------------------------------------------------------------------------- main
@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_arguments(args)
    sample = coco_sample_dir()
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(
            f"real COCO sample {sample} reused under new ids; {os.cpu_count()} CPUs, load average "
            f"{os.getloadavg()[0]:.1f}, input size {args.input_size}"
        )
        rows = []
        if "convert" in args.parts or "loader" in args.parts:
            print("conversion (a fresh process each; peak: resident memory of the converting process):")
            print(conversion_header())
            rows = convert_sizes(sample, sorted(set(args.sizes)), args.input_size, args.convert_workers, work)
            for w in args.convert_workers:
                print(extrapolation([r for r in rows if r["workers"] == w]))
            print(worker_ratios(rows, args.convert_workers))
        if "loader" in args.parts:
            small = work / "sample.h5"
            small.unlink(missing_ok=True)
            source = Source(sample / "images", sample / COCO_SAMPLE_ANNOTATIONS)
            convert([source], small, args.input_size, progress=False)
            large = Path(rows[-1]["h5"])
            best, note = loader_rates(large, small, args.input_size, args)
            print(f"reading at random, samples/s ({args.samples} samples, best of {args.rounds} taken in turn):")
            for workers in args.workers:
                s, big, cold = (best[reading, workers] for reading in ("sample", "largest", "evicted"))
                print(
                    f"  {workers} workers: sample file {s:.1f}, largest file ({rows[-1]['images']} images) {big:.1f}, "
                    f"ratio {big / s:.2f}; the largest, {note}: {cold:.1f}, ratio {cold / s:.2f}"
                )
            s, big, cold = (best[reading, "read"] for reading in ("sample", "largest", "evicted"))
            print(
                f"  reads alone (people, JPEG bytes, mask runs; best of {args.rounds}), us per sample: sample file "
                f"{s:.0f}, largest {big:.0f}, largest evicted {cold:.0f}"
            )
        if "eval" in args.parts:
            found = evaluate_sizes(sample, args.eval_images, args.eval_people, work)
            scale = VAL2017_IMAGES / args.eval_images
            for path, title in (("results", "evaluate.coco_eval --results"), ("training", "in-training validation")):
                stages = found[path]
                total, cpu = (sum(stage[k] for stage in stages) for k in (1, 2))
                print(f"evaluation, {title}: {args.eval_images} images x {args.eval_people} results")
                for name, seconds, cpu_s, peak in stages:
                    print(f"  {name:<40} {seconds:>7.2f} s {cpu_s:>7.2f} CPU s  peak {peak:>6.0f} MB")
                print(
                    f"  {'total':<40} {total:>7.2f} s {cpu:>7.2f} CPU s  (x{scale:.1f} for val2017's "
                    f"{VAL2017_IMAGES:,} images)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
