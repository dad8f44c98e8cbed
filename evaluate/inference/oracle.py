"""Oracle maps: the training targets of an image's own annotations, in place of the network's output.

Decoding them measures the decoder's upper bound ("oracle AP"): everything the grouping loses on perfect maps at the
network's resolution. ``OracleSource`` is a map source like the network: for each image of a batch it draws the targets
of that image's people (found by the image's ``ImageMeta.key``) with the codec (codec/targets.py) on the grid the
network would output for the input the image was made into (its meta's resize and padding), and for the mirrored input
too when flipping, so the whole test-time path (resize, padding, flip fusion, scale averaging) runs exactly as with a
model.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np
import torch

from simplepose.codec.pose_codec import PoseCodec
from simplepose.config.schema import OUTPUT_STRIDE, TargetConfig
from simplepose.config.skeleton import Skeleton
from simplepose.data.coco_annotations import keypoint_category
from simplepose.evaluate.inference.map_source import ImageMeta, InputBatch


def image_keypoints(annotations: list[dict], skeleton: Skeleton) -> np.ndarray:
    """(P, K, 3) internal-layout keypoints (image pixels) of an image's non-crowd annotations (``skeleton``'s
    dataset keypoints)."""
    kp = [a["keypoints"] for a in annotations if not a.get("iscrowd", 0) and a.get("keypoints")]
    if not kp:
        return np.zeros((0, skeleton.num_keypoints, 3), np.float32)
    return skeleton.to_internal(np.asarray(kp, np.float32).reshape(len(kp), skeleton.num_dataset_keypoints, 3))


class OracleSource:
    """Map source drawing the target maps of each image's people: ``keypoints_of(key)`` -> (P, K, 3) internal-layout
    keypoints in image pixels, for the ``ImageMeta.key`` of each image of a batch."""

    def __init__(
        self,
        keypoints_of: Callable[[Hashable], np.ndarray],
        targets: TargetConfig,
        skeleton: Skeleton,
        stride: int = OUTPUT_STRIDE,
    ):
        self.keypoints_of = keypoints_of
        self.skeleton = skeleton
        self.stride = stride
        self.codec = PoseCodec(skeleton, targets, stride=stride)
        self._last: tuple[Hashable, np.ndarray] | None = None  # the last image's keypoints: its scales come in a row

    def __call__(self, batch: InputBatch) -> torch.Tensor:
        people = [(meta, self.keypoints(meta.key)) for meta in batch.metas]
        maps = [self.maps(meta, kp, mirrored=False) for meta, kp in people]
        if batch.flipped:
            maps += [self.maps(meta, kp, mirrored=True) for meta, kp in people]
        return torch.from_numpy(np.stack(maps)).to(batch.pixels.device)

    def keypoints(self, key: Hashable) -> np.ndarray:
        """``keypoints_of(key)``, looked up once for the consecutive scales of one image."""
        if self._last is None or self._last[0] != key:
            self._last = (key, self.keypoints_of(key))
        return self._last[1]

    def maps(self, meta: ImageMeta, keypoints: np.ndarray, mirrored: bool) -> np.ndarray:
        """(C, Hp / stride, Wp / stride) targets of ``keypoints`` (P, K, 3 image pixels: the people of the image of
        ``meta``) in its network input (mirrored: in the input's mirror)."""
        hp, wp = meta.padded_hw
        grid = (hp // self.stride, wp // self.stride)
        fx, fy = meta.resize_xy
        kp = np.array(keypoints, copy=True)
        # OpenCV's resize maps pixel centres: x' = (x + 0.5) * f - 0.5
        kp[..., 0] = (kp[..., 0] + 0.5) * fx - 0.5
        kp[..., 1] = (kp[..., 1] + 0.5) * fy - 0.5
        if mirrored:
            kp = self.skeleton.flip_keypoints(kp).copy()
            kp[..., 0] = wp - 1 - kp[..., 0]
        return self.codec.encode(kp, None, grid)[0]


def annotation_oracle(
    coco, targets: TargetConfig, skeleton: Skeleton, image_id_of: Callable[[Hashable], int] | None = None
) -> OracleSource:
    """The oracle of the person annotations (of the keypoint category) of a pycocotools ``COCO``; an image's key is
    its image id, or ``image_id_of(key)`` gives it."""
    category = keypoint_category(coco.dataset, skeleton, "the annotations")

    def keypoints_of(key: Hashable) -> np.ndarray:
        image_id = key if image_id_of is None else image_id_of(key)
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[image_id], catIds=[category], iscrowd=None))
        return image_keypoints(anns, skeleton)

    return OracleSource(keypoints_of, targets, skeleton)
