"""One source's keypoints on a training skeleton, matched by name (docs/data.md#several-datasets).

    mapping = KeypointMapping.by_name(("left_shoulder", ..., "head", "neck"), load_skeleton("coco"), "crowd.h5")
    mapping.apply(keypoints)        # (P, 14, 3) source order -> (P, 17, 3) the skeleton's dataset order
    mapping.labelled                # (C,) loss weight per channel: 0 where the source cannot teach
    mapping.coverage()              # one line for the log

Names are matched as each dataset spells them (``config.keypoint_names``: ``Right Shoulder``, ``r shoulder``,
``RShoulder`` are ``right_shoulder``; docs/keypoint_sets.md#keypoint-names). A training keypoint the source lacks is
unlabelled (v=0) in its samples, and the channels that would teach it are
left out of the loss (``codec.layout.labelled_channels``), never taught as background. A source keypoint the
training skeleton lacks is dropped. A derived training keypoint (COCO's neck) is derived from the mapped ones, as
for any sample; a source's own keypoint of that name is dropped (the training skeleton's rule defines it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from simplepose.codec.layout import ChannelLayout, labelled_channels
from simplepose.config.keypoint_names import point_key
from simplepose.config.schema import NameMatch
from simplepose.config.skeleton import Skeleton
from simplepose.utils.commands import command
from simplepose.utils.errors import DataFileError


@dataclass(frozen=True)
class KeypointMapping:
    """Source keypoint order -> ``skeleton``'s dataset order. ``take[j]``: the source index of the skeleton's
    dataset keypoint j, or -1 where the source does not have it."""

    source: str  # the file, for messages
    source_keypoints: tuple[str, ...]
    skeleton: Skeleton
    take: tuple[int, ...]

    @classmethod
    def by_name(
        cls, source_keypoints: tuple[str, ...], skeleton: Skeleton, source: str, match: NameMatch = "spelling"
    ) -> KeypointMapping:
        """Match by name: ``spelling`` (default) pairs the names of one point however each dataset spells it
        (``config.keypoint_names.point_key``: AI Challenger's ``Right Shoulder``, MPII's ``r shoulder``, OpenPose's
        ``RShoulder``), an exact name first; ``exact`` pairs equal names only; ``position`` takes the source's
        keypoints as the skeleton's in order (as many of them). A source that shares no point with the skeleton is
        refused (naming the file and both sets of names), and so is one that names a point twice."""
        names = tuple(source_keypoints)
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise DataFileError(f"{source}: keypoint names {twice} appear twice; each must be unique", file=source)
        if match == "position":
            if len(names) != skeleton.num_dataset_keypoints:
                raise DataFileError(
                    f"{source}: {len(names)} keypoints, but skeleton {skeleton.name} has "
                    f"{skeleton.num_dataset_keypoints}: keypoint_names=position needs the same keypoints in the same "
                    "order; match them by name instead (spelling)",
                    file=source,
                )
            return cls(source=source, source_keypoints=names, skeleton=skeleton, take=tuple(range(len(names))))
        keys = [point_key(n) if match == "spelling" else n for n in names]
        groups: dict[str, list[str]] = {}
        for n, k in zip(names, keys):
            groups.setdefault(k, []).append(n)
        spelt_twice = [group for group in groups.values() if len(group) > 1]
        if spelt_twice:
            raise DataFileError(
                f"{source}: keypoints {' and '.join(map(str, spelt_twice))} name one point; rename one of them "
                f"({command('data.map_keypoints', '--rename OLD=NEW')}) or match exact names (--keypoint-names exact)",
                file=source,
            )
        take = tuple(
            names.index(n) if n in names else keys.index(point_key(n)) if match == "spelling" and point_key(n) in keys
            else -1
            for n in skeleton.dataset_keypoints
        )  # fmt: skip
        if all(i < 0 for i in take):
            raise DataFileError(
                f"{source}: none of its keypoints {list(names)} is one of the training skeleton "
                f"{skeleton.name}'s {list(skeleton.dataset_keypoints)}, however spelt; keypoints are matched by name: "
                f"rename them ({command('data.map_keypoints', '--rename OLD=NEW')}), then convert the annotations "
                "again",
                file=source,
            )
        return cls(source=source, source_keypoints=names, skeleton=skeleton, take=take)

    @property
    def identity(self) -> bool:
        """The source holds exactly the skeleton's dataset keypoints, in its order."""
        return self.take == tuple(range(len(self.source_keypoints)))

    @property
    def missing(self) -> tuple[str, ...]:
        """The skeleton's dataset keypoints the source does not annotate."""
        return tuple(n for n, i in zip(self.skeleton.dataset_keypoints, self.take) if i < 0)

    @property
    def dropped(self) -> tuple[str, ...]:
        """The source's keypoints the skeleton does not train (as dataset keypoints)."""
        return tuple(n for i, n in enumerate(self.source_keypoints) if i not in self.take)

    @property
    def renamed(self) -> tuple[tuple[str, str], ...]:
        """(the source's name, the skeleton's) of each keypoint matched under another spelling."""
        pairs = ((self.source_keypoints[i], n) for n, i in zip(self.skeleton.dataset_keypoints, self.take) if i >= 0)
        return tuple((a, b) for a, b in pairs if a != b)

    def apply(self, keypoints: np.ndarray) -> np.ndarray:
        """(P, S, 3) source-order (x, y, v) -> (P, D, 3) in the skeleton's dataset order, v=0 (unlabelled) at (0, 0)
        for the keypoints the source lacks."""
        kp = np.asarray(keypoints, np.float32).reshape(-1, len(self.source_keypoints), 3)
        if self.identity:
            return kp
        out = np.zeros((kp.shape[0], len(self.take), 3), np.float32)
        have = [j for j, i in enumerate(self.take) if i >= 0]
        out[:, have] = kp[:, [self.take[j] for j in have]]
        return out

    @cached_property
    def labelled(self) -> np.ndarray:
        """(C,) float32 loss weight per output channel for this source's samples (0: not taught)."""
        return labelled_channels(self.skeleton, np.array([i >= 0 for i in self.take]))

    @cached_property
    def labelled_mirrored(self) -> np.ndarray:
        """``labelled`` for a mirrored sample (its left and right channels swapped)."""
        return self.labelled[list(ChannelLayout.of(self.skeleton).flip)]

    def coverage(self) -> str:
        """One line: how many of the skeleton's keypoints and channels the source teaches, and what it lacks."""
        have = sum(i >= 0 for i in self.take)
        taught = int(self.labelled.sum())
        line = (
            f"{self.source}: {have} of {self.skeleton.name}'s {len(self.take)} keypoints, {taught} of "
            f"{len(self.labelled)} channels taught"
        )
        if self.renamed:
            pairs = [f"{a} = {b}" for a, b in self.renamed]
            line += f"; {len(pairs)} read by spelling ({', '.join(pairs[:4])}{', ...' if len(pairs) > 4 else ''})"
        if self.missing:
            line += f"; unlabelled: {', '.join(self.missing)}"
        if self.dropped:
            derived = [n for n in self.dropped if point_key(n) in map(point_key, self.skeleton.keypoints)]
            line += f"; not trained: {', '.join(self.dropped)}"
            line += f" ({', '.join(derived)}: {self.skeleton.name} derives its own)" if derived else ""
        return line
