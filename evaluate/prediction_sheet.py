"""A contact sheet of a trained model's people on the first validation images, each beside its ground truth (the
quick start's predictions.png).

Each image comes as a pair: on the left the annotated keypoints (labelled ones, visible or not), on the right the
model's people of two or more keypoints with each one's box and score (``evaluate.draw.draw_detections``) and its
lone keypoints as dots only (a box and a tag each would hide the people), both drawn at the sheet's size so that
lines and labels stay readable; a caption above each tile counts them, a legend on top says which side is which.
Apart from ``evaluate.draw``, which only draws given keypoints: this module loads the run's model and runs it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import torch

from simplepose.checkpoint.format import Checkpoint
from simplepose.codec.person import Person
from simplepose.config.schema import Config
from simplepose.config.skeleton import Skeleton
from simplepose.data.image_files import image_path, read_image
from simplepose.evaluate.draw import FONT, MIN_FONT_SCALE, draw_detections, draw_people
from simplepose.evaluate.estimator import PoseEstimator
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.models import build_model
from simplepose.utils.io import atomic_write_bytes

TILE_HEIGHT = 256  # pixels of each image on the sheet
PAIRS_PER_ROW = 2  # (ground truth | predictions) pairs side by side
CAPTION_HEIGHT = 20
PAIR_GAP, TILE_GAP = 12, 2  # pixels between pairs, and between the two halves of a pair
BACKGROUND = (40, 40, 40)  # BGR of the sheet behind the tiles and of the captions
LEGEND = (
    "left: ground truth (annotated keypoints)  |  right: predictions (box: person score; dots alone: lone keypoints)"
)


def draw_predictions(cfg: Config, run_dir: str | Path, num_images: int = 6) -> Path:
    """Draw the people that the run's model (``best.pt``, else ``last.pt``; skeleton: ``cfg.data.skeleton``'s) finds
    on the first ``num_images`` images of ``cfg.data.val_annotations``, on the CPU, each beside its ground truth;
    returns the written ``run_dir/predictions.png``."""
    run_dir = Path(run_dir)
    ckpt = run_dir / "best.pt" if (run_dir / "best.pt").is_file() else run_dir / "last.pt"
    model = build_model(cfg).eval()
    Checkpoint.load(ckpt).load_into(model)
    estimator = PoseEstimator.from_model(model, cfg.eval, torch.device("cpu"))
    annotations = load_ground_truth(cfg.data.val_annotations, model.skeleton, cfg.eval)
    coco = annotations.coco
    pairs = []
    for image_id in sorted(annotations.images)[:num_images]:
        image = read_image(image_path(Path(cfg.data.val_images), coco.imgs[image_id], cfg.data.val_annotations))
        (found,) = estimator.predict_batch([image])
        truth = ground_truth_keypoints(coco, image_id, model.skeleton)
        pairs.append(pair_tile(image, image_id, truth, found, model.skeleton))
    out = run_dir / "predictions.png"
    atomic_write_bytes(out, cv2.imencode(".png", sheet(pairs))[1].tobytes())
    return out


def ground_truth_keypoints(coco, image_id: int, skeleton: Skeleton) -> np.ndarray:
    """(P, K, 3) the labelled keypoints (x, y, 1; 0 where not labelled) of the image's non-crowd people that have
    any, in the skeleton's dataset order."""
    people = []
    for ann in coco.loadAnns(coco.getAnnIds(imgIds=[image_id], iscrowd=False)):
        kp = np.asarray(ann.get("keypoints") or [], np.float64).reshape(-1, 3)
        if len(kp) == skeleton.num_dataset_keypoints and (kp[:, 2] > 0).any():
            people.append(np.where(kp[:, 2:] > 0, np.concatenate([kp[:, :2], np.ones_like(kp[:, 2:])], 1), 0.0))
    return np.array(people).reshape(len(people), skeleton.num_dataset_keypoints, 3)


def pair_tile(image: np.ndarray, image_id: int, truth: np.ndarray, found: list[Person], skeleton: Skeleton):
    """One image at TILE_HEIGHT: its ground truth and its predictions side by side, each under a caption."""
    scale = TILE_HEIGHT / image.shape[0]
    small = cv2.resize(image, (max(1, round(image.shape[1] * scale)), TILE_HEIGHT), interpolation=cv2.INTER_AREA)
    truth = truth * np.array([scale, scale, 1.0])
    found = [
        replace(p, keypoints=p.keypoints * np.array([scale, scale, 1.0]), box=tuple(v * scale for v in p.box))
        for p in found
    ]
    people = [p for p in found if (p.keypoints[:, 2] > 0).sum() >= 2]
    lone = [p for p in found if (p.keypoints[:, 2] > 0).sum() < 2]
    left = captioned(draw_people(small, truth, skeleton), f"image {image_id}: ground truth, {count(len(truth))}")
    right = draw_detections(small, people, skeleton)
    if lone:  # dots only: a box and a score tag each would hide the people
        right = draw_people(right, np.array([p.keypoints for p in lone]), skeleton)
    extra = f" (+{len(lone)} lone keypoint{'s' * (len(lone) != 1)})" if lone else ""
    right = captioned(right, f"predictions, {count(len(people))}{extra}")
    gap = np.full((left.shape[0], TILE_GAP, 3), 255, np.uint8)  # a thin white line between the halves
    return np.hstack([left, gap, right])


def count(people: int) -> str:
    return f"{people} {'person' if people == 1 else 'people'}"


def captioned(tile: np.ndarray, text: str) -> np.ndarray:
    """``tile`` under a strip with ``text`` (shortened to fit)."""
    strip = np.full((CAPTION_HEIGHT, tile.shape[1], 3), BACKGROUND, np.uint8)
    while text and cv2.getTextSize(text, FONT, MIN_FONT_SCALE, 1)[0][0] > tile.shape[1] - 8:
        text = text[:-2] + "~" if len(text) > 2 else ""
    cv2.putText(strip, text, (4, CAPTION_HEIGHT - 6), FONT, MIN_FONT_SCALE, (255, 255, 255), 1, cv2.LINE_AA)
    return np.vstack([strip, tile])


def sheet(pairs: list[np.ndarray]) -> np.ndarray:
    """The pairs in rows of PAIRS_PER_ROW, under a legend line."""
    width = max(p.shape[1] for p in pairs)
    pairs = [
        cv2.copyMakeBorder(p, 0, PAIR_GAP, 0, width - p.shape[1] + PAIR_GAP, cv2.BORDER_CONSTANT, value=BACKGROUND)
        for p in pairs
    ]
    rows = [np.hstack(pairs[i : i + PAIRS_PER_ROW]) for i in range(0, len(pairs), PAIRS_PER_ROW)]
    full = rows[0].shape[1]
    rows = [cv2.copyMakeBorder(r, 0, 0, 0, full - r.shape[1], cv2.BORDER_CONSTANT, value=BACKGROUND) for r in rows]
    body = cv2.copyMakeBorder(np.vstack(rows), PAIR_GAP, 0, PAIR_GAP, 0, cv2.BORDER_CONSTANT, value=BACKGROUND)
    legend = np.full((CAPTION_HEIGHT + 8, body.shape[1], 3), BACKGROUND, np.uint8)
    cv2.putText(legend, LEGEND, (PAIR_GAP, CAPTION_HEIGHT), FONT, 0.5, (255, 255, 255), 1, cv2.LINE_AA)
    return np.vstack([legend, body])
