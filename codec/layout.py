"""The network's output channels (docs/skeleton.md#channel-layout): which channel holds what, for the targets,
the loss and the decoder alike.

The layout is the skeleton's (``config.skeleton.Skeleton``, L limbs and K internal keypoints): limb maps 0 .. L-1,
keypoint maps L .. L+K-1, then the two auxiliary channels, the person mask (L+K) and the max over the keypoint maps
(L+K+1); C = L + K + 2 (COCO: 30 + 18 + 2 = 50).
"""

from __future__ import annotations

from dataclasses import dataclass

from simplepose.config.skeleton import Skeleton


@dataclass(frozen=True)
class ChannelLayout:
    """The channels of one skeleton's layout (``of``): the one definition the targets, the loss, the flip fusion and
    the decoder read."""

    limbs: slice  # the limb maps, in ``skeleton.limbs`` order
    keypoints: slice  # the keypoint maps, in the skeleton's internal keypoint order
    person_mask: int  # the person-mask channel (auxiliary: trained, never decoded)
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
