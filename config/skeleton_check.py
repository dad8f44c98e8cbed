"""The one skeleton-compatibility check: do the keypoints a file, a checkpoint, a network or an annotation holds fit
the skeleton that reads them?

    check_compatible(skeleton, KeypointSet.of(saved), where=f"checkpoint {path}", need="layout",
                     fix="resume with the same data.skeleton")

Every reader goes through it (the converter and the evaluator for each annotation, the dataset for its HDF5 file,
resume, weight loading, evaluation for a checkpoint, inference for the network's output), and every refusal is one
``SkeletonMismatch`` with one message format:

    {where} holds {what it holds}, but {who} uses skeleton {the skeleton}: {what differs}; {what to do}

The other side tells what it knows, as a ``KeypointSet``: a whole definition (what checkpoints carry), the dataset
keypoint names in order (an HDF5 file's), a keypoint count (one annotation) or a channel count (a network's output);
everything it tells is compared, in that order, and the first difference is reported. ``need`` says how much has to
agree: ``"layout"`` for networks (every channel means the same: keypoints, derived keypoints, limbs and flips;
names, OKS sigmas and drawing may differ), ``"keypoints"`` for data (the same dataset keypoints in the same order;
the limbs are drawn at load time, so they may differ).

Names: a definition, an HDF5 file and an annotation file's category (``file_keypoint_names``) tell them, and they are
compared as ``match`` says (``NameMatch``): ``exact`` (the default), ``spelling`` (the same point however spelt,
``config.keypoint_names``: ``Right-ankle`` and ``RAnkle`` are ``right_ankle``) or ``position`` (not compared: the
file's are other names of the same keypoints in the same order, on the user's word). A refusal names both lists and
the first difference. A file whose category lists no names is accepted with one log line: its order is taken on
trust.
"""

from __future__ import annotations

import logging
import typing
from dataclasses import dataclass
from typing import Literal

from simplepose.config.keypoint_names import point_key
from simplepose.config.schema import NameMatch
from simplepose.config.skeleton import Skeleton
from simplepose.utils.errors import UserError

log = logging.getLogger(__name__)

Need = Literal["layout", "keypoints"]
NAME_MATCHES: tuple[str, ...] = typing.get_args(NameMatch)
Difference = Literal["layout", "keypoints", "keypoint count", "channels"]

_DIFFERENCES: dict[str, str] = {
    "layout": "the keypoints, derived keypoints, limbs or flips differ, so the network's channels would mean other "
    "things",
    "keypoints": "the dataset keypoints differ (names or order)",
    "keypoint count": "the number of dataset keypoints differs",
    "channels": "the number of channels (limbs + keypoints + 2) differs",
}


@dataclass(frozen=True)
class KeypointSet:
    """What one side says about its keypoints; None where it says nothing. ``assumed``: why a definition was taken
    for granted rather than read (e.g. COCO's for a checkpoint saved before checkpoints carried one)."""

    name: str | None = None
    skeleton: Skeleton | None = None  # the whole definition
    dataset_keypoints: tuple[str, ...] | None = None  # names, in the dataset's order
    num_dataset_keypoints: int | None = None
    num_channels: int | None = None
    assumed: str = ""

    @classmethod
    def of(cls, skeleton: Skeleton, assumed: str = "") -> KeypointSet:
        """Everything a definition tells."""
        return cls(
            skeleton.name,
            skeleton,
            skeleton.dataset_keypoints,
            skeleton.num_dataset_keypoints,
            skeleton.num_channels,
            assumed,
        )

    def describe(self) -> str:
        """For messages, e.g. ``skeleton 'coco' (17 dataset keypoints, ...)`` or ``51 channels``."""
        if self.skeleton is not None:
            text = f"skeleton {self.skeleton.describe()}"
        elif self.dataset_keypoints is not None:
            names = self.dataset_keypoints
            owner = f" of skeleton '{self.name}'" if self.name else ""
            text = f"the keypoints{owner} ({len(names)}: {', '.join(names)})"
        elif self.num_dataset_keypoints is not None:
            text = f"{self.num_dataset_keypoints} keypoints"
        elif self.num_channels is not None:
            text = f"{self.num_channels} channels"
        else:
            text = "keypoints of unknown kind"
        return text + (f" ({self.assumed})" if self.assumed else "")


class SkeletonMismatch(UserError):
    """``where`` holds keypoints (``found``, a ``KeypointSet``) that do not fit ``expected`` (the ``Skeleton`` that
    reads them, for ``expected_by``); ``differs``: what differs (a ``Difference``); ``fix``: what to do. ``file``,
    ``key``: the file and the entry in it, when ``where`` is one (``utils.errors.UserError``)."""

    def __init__(
        self,
        expected: Skeleton,
        found: KeypointSet,
        where: str,
        differs: str,
        fix: str,
        expected_by: str = "this run",
        **fields,
    ) -> None:
        self.expected, self.found, self.where = expected, found, where
        self.differs, self.expected_by, self.fix = differs, expected_by, fix
        self.first_difference = None  # (position, found's name, expected's name) when names differ
        detail = ""
        if differs == "keypoints" and found.dataset_keypoints is not None:
            self.first_difference = first_difference(expected.dataset_keypoints, found.dataset_keypoints)
            i, theirs, ours = self.first_difference
            detail = (
                f" (the skeleton's: {', '.join(expected.dataset_keypoints)}; first difference: keypoint {i} is "
                f"{theirs!r} there, {ours!r} in the skeleton)"
            )
        super().__init__(
            f"{where} holds {found.describe()}, but {expected_by} uses skeleton {expected.describe()}: "
            f"{_DIFFERENCES[differs]}{detail}; {fix}",
            **fields,
        )


def first_difference(expected: tuple[str, ...], found: tuple[str, ...]) -> tuple[int, str | None, str | None]:
    """(position, the found name, the expected name) of the first place two name lists differ (None past an end)."""
    i = next((i for i, (a, b) in enumerate(zip(found, expected)) if a != b), min(len(found), len(expected)))
    return i, found[i] if i < len(found) else None, expected[i] if i < len(expected) else None


def spelling(name: str) -> str:
    """A keypoint name's point, whatever its spelling (``config.keypoint_names.point_key``): ``Right-ankle``,
    ``r ankle``, ``RAnkle`` and ``right_ankle`` are one point."""
    return point_key(name)


def difference(expected: Skeleton, found: Skeleton | KeypointSet, need: Need) -> Difference | None:
    """What differs between ``expected`` and what ``found`` tells, as much as ``need`` asks; None when it fits."""
    found = found if isinstance(found, KeypointSet) else KeypointSet.of(found)
    if need == "layout" and found.skeleton is not None and not expected.same_layout(found.skeleton):
        return "layout"
    names = found.dataset_keypoints
    if names is not None and tuple(names) != expected.dataset_keypoints:
        return "keypoints"
    if found.num_dataset_keypoints is not None and found.num_dataset_keypoints != expected.num_dataset_keypoints:
        return "keypoint count"
    if need == "layout" and found.num_channels is not None and found.num_channels != expected.num_channels:
        return "channels"
    return None


def mismatch(expected: Skeleton, found: Skeleton | KeypointSet, *, need: Need, **details) -> SkeletonMismatch | None:
    """The ``SkeletonMismatch`` ``check_compatible`` would raise, or None (for callers that count a mismatch
    instead, such as the converter with --skip-bad). ``details``: ``where``, ``fix``, ``expected_by`` and the
    error's fields, as ``check_compatible`` takes them."""
    differs = difference(expected, found, need)
    if differs is None:
        return None
    found = found if isinstance(found, KeypointSet) else KeypointSet.of(found)
    return SkeletonMismatch(expected, found, differs=differs, **details)


def check_compatible(
    expected: Skeleton,
    found: Skeleton | KeypointSet,
    *,
    where: str,
    need: Need,
    fix: str,
    expected_by: str = "this run",
    **fields,
) -> None:
    """``SkeletonMismatch`` unless ``found`` fits ``expected`` (see ``difference``). ``where``: what holds ``found``
    (``checkpoint runs/x/last.pt``, ``HDF5 file x.h5``, ``the network's output``...); ``fix``: what to do;
    ``fields``: ``file``, ``key``, ``sample`` of the error."""
    error = mismatch(expected, found, need=need, where=where, fix=fix, expected_by=expected_by, **fields)
    if error is not None:
        raise error


def annotation_keypoints(
    keypoints: list, skeleton: Skeleton, *, where: str, fix: str, expected_by: str, **fields
) -> SkeletonMismatch | None:
    """The mismatch of one COCO annotation's flat 'keypoints' list (3 numbers per keypoint) with ``skeleton``'s
    dataset keypoints, or None; a list whose length is not a multiple of 3 is malformed, not of another skeleton
    (None here too: the caller reports it)."""
    if len(keypoints) % 3:
        return None
    found = KeypointSet(num_dataset_keypoints=len(keypoints) // 3)
    return mismatch(
        skeleton, found, where=where, need="keypoints", fix=fix, expected_by=expected_by, key="keypoints", **fields
    )


def file_keypoint_names(
    skeleton: Skeleton, names: object, *, where: str, match: NameMatch, fix: str, expected_by: str, **fields
) -> SkeletonMismatch | None:
    """The mismatch of the keypoint names an annotation file's category lists (``names``: its 'keypoints' entry, or
    None) with ``skeleton``'s dataset keypoints, compared as ``match`` says (module docstring), or None when they fit.

    No names (None, an empty list): accepted, with one log line saying the order is taken on trust. More names than the
    skeleton's keypoints (Human-Art lists 21 for annotations of 17): the first ones are compared, the rest are logged
    as unused (each annotation's keypoint count is checked on its own, ``annotation_keypoints``)."""
    expected = skeleton.dataset_keypoints
    if not isinstance(names, list) or not names:
        log.info(
            "%s lists no keypoint names: its keypoints are taken to be skeleton '%s''s %d in order (%s), on trust",
            where,
            skeleton.name,
            len(expected),
            ", ".join(expected),
        )
        return None
    listed = tuple(str(n) for n in names)
    found = listed[: len(expected)] if len(listed) > len(expected) else listed
    same = {
        "exact": lambda a, b: a == b,
        "spelling": lambda a, b: spelling(a) == spelling(b),
        "position": lambda a, b: True,
    }[match]
    if len(found) != len(expected) or not all(same(a, b) for a, b in zip(found, expected)):
        return SkeletonMismatch(
            skeleton,
            KeypointSet(dataset_keypoints=listed),
            where,
            "keypoints",
            fix,
            expected_by,
            key="categories",
            **fields,
        )
    if len(listed) > len(expected):
        log.info(
            "%s lists %d keypoint names, its annotations are read as the first %d (skeleton '%s'); not read: %s",
            where,
            len(listed),
            len(expected),
            skeleton.name,
            ", ".join(listed[len(expected) :]),
        )
    renamed = [f"{a} = {b}" for a, b in zip(found, expected) if a != b]
    if renamed:
        log.info(
            "%s names %d keypoints otherwise than skeleton '%s' (keypoint_names=%s): %s",
            where,
            len(renamed),
            skeleton.name,
            match,
            "; ".join(renamed),
        )
    return None
