"""Several converted files as one training set (docs/data.md#several-datasets).

    mix = open_sources(["coco_train512.h5", "crowdpose_train512.h5"], cfg, train=True)   # data.train_sources
    mix[i]                       # the sample of one source, with "labelled" (data.keypoint_mapping)
    mix.sample_weights()         # (N,) for the sampler: each source's share of an epoch, data.source_weights

Each file keeps its own keypoints (stored when it was converted); they are matched onto ``data.skeleton``'s by name
when the run starts, and each source's coverage is logged.
"""

from __future__ import annotations

import bisect
import logging
from pathlib import Path

import numpy as np
import torch

from simplepose.config.schema import Config
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_file import skeleton_of
from simplepose.data.dataset import SimplePoseDataset, read_settings, stored_keypoints
from simplepose.data.keypoint_mapping import KeypointMapping
from simplepose.utils.commands import command
from simplepose.utils.errors import DataFileError

log = logging.getLogger(__name__)


def source_mapping(path: str | Path, skeleton: Skeleton) -> KeypointMapping:
    """The mapping of the keypoints the converted file ``path`` holds onto ``skeleton``'s, by name."""
    names = stored_keypoints(read_settings(path)).dataset_keypoints or ()
    return KeypointMapping.by_name(names, skeleton, str(path))


class SourceMix(torch.utils.data.Dataset):
    """The samples of several ``SimplePoseDataset`` one after another: index i is sample ``i - offset[s]`` of
    source s. ``weights``: each source's relative share of an epoch (None: in proportion to their sizes)."""

    epoch_reaches_workers = True  # its sources' set_epoch does (data/dataset.py)

    def __init__(self, sources: list[SimplePoseDataset], weights: list[float] | None = None) -> None:
        if weights is not None and len(weights) != len(sources):
            raise ValueError(f"{len(weights)} weights for {len(sources)} sources")
        self.sources, self.weights = sources, weights
        self.offsets = np.cumsum([0] + [len(s) for s in sources]).tolist()
        self.names = source_names([s.path for s in sources])

    def __len__(self) -> int:
        return self.offsets[-1]

    @property
    def num_images(self) -> int:
        """The images of every source."""
        return sum(s.num_images for s in self.sources)

    def locate(self, index: int) -> tuple[int, int]:
        """(source, index within it) of sample ``index``."""
        s = bisect.bisect_right(self.offsets, index) - 1
        return s, index - self.offsets[s]

    def __getitem__(self, index: int) -> dict:
        s, i = self.locate(int(index))
        return self.sources[s][i]

    def set_epoch(self, epoch: int) -> None:
        for source in self.sources:
            source.set_epoch(epoch)

    def close(self) -> None:
        """Close every source's file (``SimplePoseDataset.close``)."""
        for source in self.sources:
            source.close()

    def sample_weights(self) -> torch.Tensor | None:
        """(N,) float64 drawing weight per sample (each source's weight spread over its samples), or None to visit
        every sample once per epoch (no data.source_weights)."""
        if self.weights is None:
            return None
        return torch.cat(
            [torch.full((len(s),), w / len(s), dtype=torch.float64) for s, w in zip(self.sources, self.weights)]
        )

    def image_id(self, index: int) -> int:
        """The image id of sample ``index`` (in its source's file), for messages."""
        s, i = self.locate(index)
        source = self.sources[s]
        return int(source.image_id[source.sample_image[i]])


def source_names(paths: list[str]) -> list[str]:
    """Short unique names of the sources, for logs and the per-source figures: the file stems (with their folder
    where two stems are the same)."""
    stems = [Path(p).stem for p in paths]
    return [stem if stems.count(stem) == 1 else f"{Path(p).parent.name}/{stem}" for stem, p in zip(stems, paths)]


def check_training_file(path: str | Path, key: str) -> None:
    """DataFileError unless ``path`` (config key ``key``) is a file: for a folder, that it is one and that a
    converted HDF5 file goes there; for nothing there, the command that makes it."""
    if Path(path).is_file():
        return
    where = f"{key}={path}" if key != "data.train_sources" else f"{key}: {path}"
    if Path(path).is_dir():
        raise DataFileError(
            f"{where} is a folder; training reads one HDF5 file made from images and annotations: convert them with "
            f"`{command('data.coco_to_hdf5', f'--images {path} --annotations FILE.json --out FILE.h5')}` and give the "
            ".h5",
            file=path,
            key=key,
        )
    raise DataFileError(
        f"{where}: no such file (make it with `{command('data.coco_to_hdf5', f'... --out {path}')}`)",
        file=path,
        key=key,
    )


def open_sources(paths: list[str], cfg: Config, train: bool, weights: list[float] | None = None) -> SourceMix:
    """The files of ``data.train_sources`` as one ``SourceMix`` for ``cfg.data.skeleton``, each mapped by name and its
    coverage logged. A missing file is named with the command that makes it."""
    skeleton = skeleton_of(cfg)
    sources = []
    for path in paths:
        check_training_file(path, "data.train_sources")
        mapping = source_mapping(path, skeleton)
        log.info("source %s", mapping.coverage())
        sources.append(SimplePoseDataset(path, cfg, train=train, skeleton=skeleton, mapping=mapping))
    return SourceMix(sources, weights or None)
