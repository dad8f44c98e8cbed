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
from simplepose.data.augment import warp_mask_to_grid
from simplepose.data.coco_annotations import keypoint_category
from simplepose.data.person_masks import image_masks
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
    keypoints in image pixels, for the ``ImageMeta.key`` of each image of a batch; ``mask_of(key)`` -> its (H, W)
    uint8 {0, 255} person mask (``data.person_masks.image_masks``' ``mask_all``), or None where the image has no
    silhouettes (the person channel then stays blank, as training does not teach it there)."""

    def __init__(
        self,
        keypoints_of: Callable[[Hashable], np.ndarray],
        targets: TargetConfig,
        skeleton: Skeleton,
        stride: int = OUTPUT_STRIDE,
        mask_of: Callable[[Hashable], np.ndarray | None] | None = None,
    ):
        self.keypoints_of = keypoints_of
        self.mask_of = mask_of
        self.skeleton = skeleton
        self.stride = stride
        self.codec = PoseCodec(skeleton, targets, stride=stride)
        # the last image's keypoints and person mask: its scales come in a row
        self._last: tuple[Hashable, np.ndarray, np.ndarray | None] | None = None

    def __call__(self, batch: InputBatch) -> torch.Tensor:
        people = [(meta, self.keypoints(meta.key)) for meta in batch.metas]
        maps = [self.maps(meta, kp, mirrored=False, mask=self._last_mask(meta.key)) for meta, kp in people]
        if batch.flipped:
            maps += [self.maps(meta, kp, mirrored=True, mask=self._last_mask(meta.key)) for meta, kp in people]
        return torch.from_numpy(np.stack(maps)).to(batch.pixels.device)

    def keypoints(self, key: Hashable) -> np.ndarray:
        """``keypoints_of(key)``, looked up once for the consecutive scales of one image."""
        if self._last is None or self._last[0] != key:
            self._last = (key, self.keypoints_of(key), self.mask_of(key) if self.mask_of is not None else None)
        return self._last[1]

    def _last_mask(self, key: Hashable) -> np.ndarray | None:
        self.keypoints(key)
        assert self._last is not None
        return self._last[2]

    def maps(
        self, meta: ImageMeta, keypoints: np.ndarray, mirrored: bool, mask: np.ndarray | None = None
    ) -> np.ndarray:
        """(C, Hp / stride, Wp / stride) targets of ``keypoints`` (P, K, 3 image pixels: the people of the image of
        ``meta``) in its network input (mirrored: in the input's mirror); ``mask``: the image's (H, W) uint8 person
        mask, warped onto the grid as training warps it (``data.augment.warp_mask_to_grid``), or None (blank)."""
        hp, wp = meta.padded_hw
        grid = (hp // self.stride, wp // self.stride)
        fx, fy = meta.resize_xy
        # OpenCV's resize maps pixel centres: x' = (x + 0.5) * f - 0.5
        matrix = np.array([[fx, 0.0, 0.5 * fx - 0.5], [0.0, fy, 0.5 * fy - 0.5]])
        if mirrored:
            matrix = np.array([[-1.0, 0.0, wp - 1.0], [0.0, 1.0, 0.0]]) @ np.vstack([matrix, [0.0, 0.0, 1.0]])
        kp = np.array(keypoints, copy=True)
        kp[..., 0] = (kp[..., 0] + 0.5) * fx - 0.5
        kp[..., 1] = (kp[..., 1] + 0.5) * fy - 0.5
        if mirrored:
            kp = self.skeleton.flip_keypoints(kp).copy()
            kp[..., 0] = wp - 1 - kp[..., 0]
        person = None if mask is None else warp_mask_to_grid(mask, matrix, (hp, wp), self.stride, 0)
        return self.codec.encode(kp, person, grid)[0]


def annotation_oracle(
    coco, targets: TargetConfig, skeleton: Skeleton, image_id_of: Callable[[Hashable], int] | None = None
) -> OracleSource:
    """The oracle of the person annotations (of the keypoint category) of a pycocotools ``COCO``; an image's key is
    its image id, or ``image_id_of(key)`` gives it."""
    category = keypoint_category(coco.dataset, skeleton, "the annotations")

    def annotations(key: Hashable) -> tuple[Hashable, list[dict]]:
        image_id = key if image_id_of is None else image_id_of(key)
        return image_id, coco.loadAnns(coco.getAnnIds(imgIds=[image_id], catIds=[category], iscrowd=None))

    def keypoints_of(key: Hashable) -> np.ndarray:
        return image_keypoints(annotations(key)[1], skeleton)

    def mask_of(key: Hashable) -> np.ndarray | None:
        image_id, anns = annotations(key)
        if not anns or any(_box_stand_in(a) for a in anns):
            return None  # boxes, not silhouettes: training does not teach the person channel there
        info = coco.imgs[image_id]
        if "height" not in info or "width" not in info:
            return None  # the file gives no image size (an optional field): no silhouettes without reading pixels
        return image_masks(anns, int(info["height"]), int(info["width"]))[1]

    return OracleSource(keypoints_of, targets, skeleton, mask_of=mask_of)


def _box_stand_in(ann: dict) -> bool:
    """Whether an annotation's region is its box: no segmentation, or the box as one polygon, the stand-in of a file
    without silhouettes (``data.coco_annotations.with_defaults``; CrowdPose)."""
    seg = ann.get("segmentation")
    if not seg:
        return True
    if not isinstance(seg, list) or len(seg) != 1:
        return False
    x, y, w, h = ann["bbox"]
    box = [x, y, x + w, y, x + w, y + h, x, y + h]
    return len(seg[0]) == 8 and bool(np.allclose(np.asarray(seg[0], np.float64), box))
