"""A contact sheet of a trained model's people on the first validation images (the quick start's predictions.png).

Apart from ``evaluate.draw``, which only draws given keypoints: this module loads the run's model and runs it.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import torch

from config.schema import Config
from data.image_files import read_image
from engine.checkpoint import Checkpoint
from evaluate.coco_eval import image_path, load_coco
from evaluate.draw import draw_people
from evaluate.predictor import PoseEstimator
from models import build_model
from utils.io import atomic_write_bytes

TILE_HEIGHT = 256  # pixels of each image on the sheet
TILES_PER_ROW = 3


def draw_predictions(cfg: Config, run_dir: str | Path, num_images: int = 6) -> Path:
    """Draw the people that the run's model (``best.pt``, else ``last.pt``; skeleton: ``cfg.data.skeleton``'s) finds
    on the first ``num_images`` images of ``cfg.data.val_annotations``, on the CPU; returns the written
    ``run_dir/predictions.png``."""
    run_dir = Path(run_dir)
    ckpt = run_dir / "best.pt" if (run_dir / "best.pt").is_file() else run_dir / "last.pt"
    model = build_model(cfg).eval()
    Checkpoint.load(ckpt).load_into(model)
    estimator = PoseEstimator.from_model(model, cfg.eval, torch.device("cpu"))
    coco = load_coco(cfg.data.val_annotations, model.skeleton)
    tiles = []
    for image_id in sorted(coco.getImgIds())[:num_images]:
        image = read_image(image_path(Path(cfg.data.val_images), coco.imgs[image_id]["file_name"]))
        (people,) = estimator.people([image])
        tile = draw_people(image, people.keypoints, model.skeleton)
        tiles.append(cv2.resize(tile, (round(tile.shape[1] * TILE_HEIGHT / tile.shape[0]), TILE_HEIGHT)))
    width = max(t.shape[1] for t in tiles)
    tiles = [cv2.copyMakeBorder(t, 2, 2, 2, width - t.shape[1] + 2, cv2.BORDER_CONSTANT) for t in tiles]
    rows = [np.hstack(tiles[i : i + TILES_PER_ROW]) for i in range(0, len(tiles), TILES_PER_ROW)]
    rows = [cv2.copyMakeBorder(r, 0, 0, 0, rows[0].shape[1] - r.shape[1], cv2.BORDER_CONSTANT) for r in rows]
    out = run_dir / "predictions.png"
    atomic_write_bytes(out, cv2.imencode(".png", np.vstack(rows))[1].tobytes())
    return out
