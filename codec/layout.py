"""The network's output channels (docs/skeleton.md#channel-layout): which channel holds what, for the targets,
the loss and the decoder alike.

The layout is the skeleton's (``config.skeleton.Skeleton``, L limbs and K internal keypoints): limb maps 0 .. L-1,
keypoint maps L .. L+K-1, then the two auxiliary channels, the person mask (L+K) and the max over the keypoint maps
(L+K+1); C = L + K + 2 (COCO: 30 + 18 + 2 = 50).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simplepose.config.skeleton import VIS_UNLABELLED, Skeleton


@dataclass(frozen=True)
class ChannelLayout:
    """The channels of one skeleton's layout (``of``): the one definition the targets, the loss, the flip fusion and
    the decoder read."""

    limbs: slice  # the limb maps, in ``skeleton.limbs`` order
    keypoints: slice  # the keypoint maps, in the skeleton's internal keypoint order
    person_mask: int  # the person-mask channel (auxiliary: trained; decoded only for eval.join_person)
    max_keypoint: int  # the max-over-keypoints channel (auxiliary: trained, never decoded)
    num_channels: int
    # channel c of a prediction on a mirrored image holds what channel flip[c] holds on the original (a permutation
    # and an involution)
    flip: tuple[int, ...]

    @classmethod
    def of(cls, skeleton: Skeleton) -> ChannelLayout:
        """The layout of ``skeleton``'s ``num_limbs`` L and ``num_keypoints`` K (module docstring); the mirror's
        channels from its limb and keypoint flips."""
        num_limbs, num_keypoints = skeleton.num_limbs, skeleton.num_keypoints
        person_mask = num_limbs + num_keypoints
        flip = (
            *skeleton.limb_flip,
            *(num_limbs + j for j in skeleton.keypoint_flip),
            person_mask,
            person_mask + 1,
        )
        assert len(flip) == skeleton.num_channels, "Skeleton.num_channels and the layout disagree"
        return cls(
            limbs=slice(0, num_limbs),
            keypoints=slice(num_limbs, person_mask),
            person_mask=person_mask,
            max_keypoint=person_mask + 1,
            num_channels=skeleton.num_channels,
            flip=flip,
        )

    def groups(self) -> dict[str, slice]:
        """The channels of each loss group: limb, keypoint, person_mask, max_keypoint."""
        return {
            "limb": self.limbs,
            "keypoint": self.keypoints,
            "person_mask": slice(self.person_mask, self.person_mask + 1),
            "max_keypoint": slice(self.max_keypoint, self.max_keypoint + 1),
        }


def channel_groups(skeleton: Skeleton) -> dict[str, slice]:
    """The channels of each loss group in ``skeleton``'s layout: limb, keypoint, person_mask, max_keypoint."""
    return ChannelLayout.of(skeleton).groups()


def labelled_channels(skeleton: Skeleton, annotated: np.ndarray) -> np.ndarray:
    """(C,) float32 loss weight per channel of a sample whose source annotates the dataset keypoints ``annotated``
    ((D,) bool, dataset order): 0 for the keypoint map of each internal keypoint the source cannot label (a
    derived one when any of its sources is missing), for every limb that touches one, and for the max over the
    keypoint maps (it would teach those keypoints as background); 1 elsewhere (the person mask is every source's).
    """
    vis = np.where(np.asarray(annotated, bool), 2.0, 0.0).astype(np.float32)
    person = np.zeros((1, skeleton.num_dataset_keypoints, 3), np.float32)
    person[0, :, 2] = vis
    known = skeleton.to_internal(person)[0, :, 2] < VIS_UNLABELLED  # (K,) internal keypoints the source labels
    layout = ChannelLayout.of(skeleton)
    weight = np.ones(layout.num_channels, np.float32)
    weight[layout.keypoints] = known
    weight[layout.limbs] = [known[a] and known[b] for a, b in skeleton.limbs]
    if not known.all():
        weight[layout.max_keypoint] = 0
    return weight
