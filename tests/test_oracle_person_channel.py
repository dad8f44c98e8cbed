"""The oracle draws the person channel as training does: the silhouettes of the real COCO sample's people, blank where
the annotations hold boxes only (CrowdPose's kind: training does not teach the channel there)."""

from __future__ import annotations

import json

import numpy as np
import torch

from simplepose.codec.layout import ChannelLayout
from simplepose.config.schema import EvalConfig, TargetConfig
from simplepose.data.person_masks import image_masks
from simplepose.evaluate.inference.multiscale import multiscale_maps
from simplepose.evaluate.inference.oracle import annotation_oracle
from simplepose.evaluate.metrics.annotations import load_ground_truth
from tests.helpers import COCO
from tests.paths import COCO_SAMPLE_ANNOTATIONS, COCO_SAMPLE_FETCHED

SAMPLE = COCO_SAMPLE_FETCHED / COCO_SAMPLE_ANNOTATIONS  # shipped with the checkout (the images are not needed)


def person_channel(annotations, image_id: int) -> tuple[np.ndarray, tuple[float, float], dict]:
    """The oracle's person channel of one image at scale 1 (with its mirror fused), image pixels per map pixel, and
    the image's info."""
    coco = load_ground_truth(annotations, COCO, EvalConfig()).coco
    info = coco.imgs[image_id]
    cfg = EvalConfig(scales=[1.0])
    blank = np.zeros((info["height"], info["width"], 3), np.uint8)
    source = annotation_oracle(coco, TargetConfig(), COCO)
    maps, scale = multiscale_maps(blank, cfg, source, torch.device("cpu"), skeleton=COCO, key=image_id)
    return maps[ChannelLayout.of(COCO).person_mask], scale, info


def largest_person_image(data: dict) -> int:
    return max(data["annotations"], key=lambda a: a["area"] if not a["iscrowd"] else 0)["image_id"]


def test_the_person_channel_is_the_silhouettes_on_the_grid():
    data = json.loads(SAMPLE.read_text())
    image_id = largest_person_image(data)
    channel, (sx, sy), info = person_channel(SAMPLE, image_id)
    anns = [a for a in data["annotations"] if a["image_id"] == image_id]
    silhouettes = image_masks(anns, info["height"], info["width"])[1] > 0
    # every map pixel's centre in the image, and whether it falls inside a silhouette
    ys, xs = np.mgrid[0 : channel.shape[0], 0 : channel.shape[1]]
    inside = silhouettes[
        np.clip(((ys + 0.5) * sy - 0.5).round().astype(int), 0, info["height"] - 1),
        np.clip(((xs + 0.5) * sx - 0.5).round().astype(int), 0, info["width"] - 1),
    ]
    assert inside.mean() > 0.05  # a large person: both sides are tested
    assert np.median(channel[inside]) > 0.9
    assert np.median(channel[~inside]) < 0.05


def test_the_person_channel_stays_blank_where_the_people_are_boxes(tmp_path):
    data = json.loads(SAMPLE.read_text())
    for ann in data["annotations"]:
        ann.pop("segmentation")  # read with the box as its region, as a CrowdPose file is
    boxes = tmp_path / "boxes.json"
    boxes.write_text(json.dumps(data))
    channel, _, _ = person_channel(boxes, largest_person_image(data))
    assert not channel.any()
