"""HDF5 size and data-pipeline throughput of one dataset stored as JPEG and as PNG.

    python -m bench.image_formats [--images 40] [--input-size 256] [--rounds 3] [--items 80]

The converter keeps each image file's original bytes in the HDF5 file (``images/jpeg``: whatever format the file
is), so a PNG dataset stays lossless and as large as its PNGs, and the dataset decodes it with OpenCV (libjpeg-turbo
through simplejpeg for JPEG). This script generates a synthetic set (data.synthetic), writes its pictures once as
JPEG (quality 92, as the generator) and once as PNG, converts both, and prints each HDF5 file's size and the
samples/s of ``dataset[i]`` (training augmentation, one thread), the two formats timed alternately (A B A B ...) so
that a busy machine slows both alike.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import cv2
import torch

from simplepose.config.config_file import load_config
from simplepose.data.conversion import Source, convert
from simplepose.data.dataset import SimplePoseDataset
from simplepose.data.synthetic_images import generate
from simplepose.utils.errors import cli_main
from tests.paths import TINY_PRESET


def as_png(root: Path, out: Path) -> Path:
    """The set's train annotations with every picture re-written as PNG in ``out`` (the same pixels)."""
    data = json.loads((root / "annotations" / "person_keypoints_train.json").read_text())
    out.mkdir()
    for img in data["images"]:
        name = Path(img["file_name"]).with_suffix(".png").name
        cv2.imwrite(str(out / name), cv2.imread(str(root / "images" / img["file_name"])))
        img["file_name"] = name
    path = root / "annotations" / "png_train.json"
    path.write_text(json.dumps(data))
    return path


def samples_per_s(dataset: SimplePoseDataset, items: int) -> float:
    start = time.perf_counter()
    for i in range(items):
        dataset[i % len(dataset)]
    return items / (time.perf_counter() - start)


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.image_formats", description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=40, help="synthetic pictures (256-384 px)")
    p.add_argument("--input-size", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3, help="alternated timing rounds per format")
    p.add_argument("--items", type=int, default=80, help="dataset items per round")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "set"
        generate(root, num_images=args.images, seed=0, val_fraction=0)
        sources = {"jpeg": Source(root / "images", root / "annotations" / "person_keypoints_train.json"),
                   "png": Source(root / "png", as_png(root, root / "png"))}  # fmt: skip
        cfg = load_config(TINY_PRESET, [f"data.input_size={args.input_size}"])
        datasets, sizes = {}, {}
        for kind, source in sources.items():
            h5 = Path(tmp) / f"{kind}.h5"
            convert([source], h5, args.input_size, progress=False)
            sizes[kind] = h5.stat().st_size
            files = sum(f.stat().st_size for f in source.images.iterdir())
            datasets[kind] = SimplePoseDataset(h5, cfg, train=True)
            print(f"{kind:>4}: image files {files / 2**20:6.2f} MiB, HDF5 {sizes[kind] / 2**20:6.2f} MiB")
        rates: dict[str, list[float]] = {k: [] for k in datasets}
        for dataset in datasets.values():  # warm-up
            samples_per_s(dataset, 4)
        for _ in range(args.rounds):
            for kind, dataset in datasets.items():
                rates[kind].append(samples_per_s(dataset, args.items))
        for kind, r in rates.items():
            print(f"{kind:>4}: {max(r):6.1f} samples/s (best of {len(r)}; all: {', '.join(f'{x:.1f}' for x in r)})")
        print(f"PNG / JPEG: HDF5 size x{sizes['png'] / sizes['jpeg']:.2f}, samples/s "
              f"x{max(rates['png']) / max(rates['jpeg']):.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
