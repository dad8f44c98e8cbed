"""Oracle maps: the training targets of an image's own annotations, in place of the network's output.

Decoding them measures the decoder's upper bound ("oracle AP"): everything the grouping loses on perfect
maps at the network's resolution. The maps are drawn with codec.targets on the grid the network would output
for each test scale, and for the mirrored input too when flipping, so the whole test-time path (resize,
padding, flip fusion, scale averaging) runs exactly as with a model.
"""

from __future__ import annotations

import numpy as np
import torch

from codec.pose_codec import PoseCodec
from config.schema import TargetConfig
from config.skeleton import Skeleton
from data.coco_annotations import keypoint_category
from evaluate.runtime.multiscale import Predictor


def image_keypoints(annotations: list[dict], skeleton: Skeleton) -> np.ndarray:
    """(P, K, 3) internal-layout keypoints (image pixels) of an image's non-crowd annotations (``skeleton``'s
    dataset keypoints)."""
    kp = [a["keypoints"] for a in annotations if not a.get("iscrowd", 0) and a.get("keypoints")]
    if not kp:
        return np.zeros((0, skeleton.num_keypoints, 3), np.float32)
    return skeleton.to_internal(np.asarray(kp, np.float32).reshape(len(kp), skeleton.num_dataset_keypoints, 3))


def oracle_predictor(keypoints: np.ndarray, targets: TargetConfig, skeleton: Skeleton, stride: int = 4) -> Predictor:
    """Predictor drawing the target maps of ``keypoints`` (P, K, 3 image pixels) for each resized input."""
    codec = PoseCodec(skeleton, targets, stride=stride)

    def predict(batch: torch.Tensor, resize_xy: tuple[float, float]) -> torch.Tensor:
        hp, wp = batch.shape[2:]
        grid = (hp // stride, wp // stride)
        kp = keypoints.copy()
        # OpenCV's resize maps pixel centres: x' = (x + 0.5) * f - 0.5
        kp[..., 0] = (kp[..., 0] + 0.5) * resize_xy[0] - 0.5
        kp[..., 1] = (kp[..., 1] + 0.5) * resize_xy[1] - 0.5
        maps = [codec.encode(kp, None, grid)[0]]
        if batch.shape[0] == 2:
            mirrored = skeleton.flip_keypoints(kp).copy()
            mirrored[..., 0] = wp - 1 - mirrored[..., 0]
            maps.append(codec.encode(mirrored, None, grid)[0])
        return torch.from_numpy(np.stack(maps)).to(batch.device)

    return predict


def oracle_for(coco, image_ids: list[int], targets: TargetConfig, skeleton: Skeleton, stride: int = 4) -> Predictor:
    """The oracle predictor of the given images' person annotations (of the keypoint category) in a pycocotools
    ``COCO``."""
    category = keypoint_category(coco.dataset, skeleton, "the annotations")
    anns = coco.loadAnns(coco.getAnnIds(imgIds=list(image_ids), catIds=[category], iscrowd=None))
    return oracle_predictor(image_keypoints(anns, skeleton), targets, skeleton, stride)
