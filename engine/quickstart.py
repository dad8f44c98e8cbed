"""The quick start's data: a synthetic COCO-format dataset, made and converted once, then reused.

``python train.py`` with no --config and no data.train calls ``prepare_synthetic_data``; the result is cached
under ``data.synthetic_dir`` and rebuilt only when its settings change.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from config.schema import Config
from utils.io import atomic_write_text


def prepare_synthetic_data(cfg: Config) -> dict[str, str]:
    """Make (or reuse) the synthetic dataset and its HDF5 files; returns the data.* settings that point at them."""
    from data.coco_to_hdf5 import FORMAT_VERSION, Source, convert
    from data.synthetic import generate

    d = cfg.data
    root = Path(d.synthetic_dir)
    images, ann = root / "images", root / "annotations"
    wanted = {"num_images": d.synthetic_images, "seed": d.synthetic_seed, "format_version": FORMAT_VERSION}
    marker = root / "synthetic.json"
    if not marker.is_file() or json.loads(marker.read_text()) != wanted:
        print(f"making {d.synthetic_images} synthetic images in {root} (once)")
        generate(root, d.synthetic_images, d.synthetic_seed)
        for old in root.glob("*.h5"):
            old.unlink()
        atomic_write_text(marker, json.dumps(wanted))
    for split in ("train", "val"):
        h5 = root / f"{split}{d.input_size}.h5"
        if not h5.is_file():
            convert([Source(images, ann / f"person_keypoints_{split}.json")], h5, input_size=d.input_size,
                    split=f"synthetic-{split}", progress=False)  # fmt: skip
    return {
        "data.train": str(root / f"train{d.input_size}.h5"),
        "data.val": str(root / f"val{d.input_size}.h5"),
        "data.val_images": str(images),
        "data.val_annotations": str(ann / "person_keypoints_val.json"),
    }


def draw_predictions(cfg: Config, run_dir: str | Path, num_images: int = 6) -> Path:
    """A picture of the trained model's people on the first validation images (best.pt, else last.pt)."""
    import cv2
    import numpy as np

    from evaluate.coco_eval import image_path, load_coco, read_image
    from evaluate.demo import estimate
    from evaluate.draw import draw_people
    from evaluate.inference import model_predictor
    from models import build_model, load_weights
    from utils.io import atomic_write_bytes

    run_dir = Path(run_dir)
    ckpt = run_dir / "best.pt" if (run_dir / "best.pt").is_file() else run_dir / "last.pt"
    model = build_model(cfg).eval()
    load_weights(model, ckpt)
    predict = model_predictor(model)
    coco = load_coco(cfg.data.val_annotations)
    tiles = []
    for image_id in sorted(coco.getImgIds())[:num_images]:
        image = read_image(image_path(Path(cfg.data.val_images), coco.imgs[image_id]["file_name"]))
        people, _, _ = estimate(image, cfg, predict, torch.device("cpu"))
        tile = draw_people(image, people.keypoints)
        tiles.append(cv2.resize(tile, (round(tile.shape[1] * 256 / tile.shape[0]), 256)))
    width = max(t.shape[1] for t in tiles)
    tiles = [cv2.copyMakeBorder(t, 2, 2, 2, width - t.shape[1] + 2, cv2.BORDER_CONSTANT) for t in tiles]
    rows = [np.hstack(tiles[i : i + 3]) for i in range(0, len(tiles), 3)]
    rows = [cv2.copyMakeBorder(r, 0, 0, 0, rows[0].shape[1] - r.shape[1], cv2.BORDER_CONSTANT) for r in rows]
    out = run_dir / "predictions.png"
    atomic_write_bytes(out, cv2.imencode(".png", np.vstack(rows))[1].tobytes())
    return out
