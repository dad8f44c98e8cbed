"""Reads of ``[a, b)`` ranges of the 1-D blob datasets of an HDF5 file (JPEG bytes, mask runs), straight from a
memory map of the file.

h5py spends tens of microseconds per slice (selection set-up) and copies every chunk it touches through its chunk
cache, which random access keeps evicting; reading the bytes straight from the map costs less per sample
(docs/benchmarks.md#data-pipeline-stages). Uncompressed, unfiltered datasets (what ``data.h5_format.H5Writer``
makes) are read at the byte offsets HDF5 reports for their chunks; any other layout falls back to h5py slicing.

    reader = BlobReader(path, h5_file["images/jpeg"])
    jpeg = reader.read(a, b)     # a new (b - a,) array of the dataset's dtype
"""

from __future__ import annotations

import mmap

import h5py
import numpy as np


class BlobReader:
    """``read(a, b)`` of a 1-D dataset; ``buffer`` is the file's bytes (one memory map shared by its readers)."""

    def __init__(self, dataset: h5py.Dataset, buffer: np.ndarray):
        self.dataset = dataset
        self.buffer = buffer
        self.itemsize = dataset.dtype.itemsize
        plist = dataset.id.get_create_plist()
        layout = plist.get_layout()
        self.mapped = dataset.ndim == 1 and plist.get_nfilters() == 0 and plist.get_external_count() == 0
        self.mapped &= layout in (h5py.h5d.CONTIGUOUS, h5py.h5d.CHUNKED)
        self.chunk = dataset.chunks[0] if layout == h5py.h5d.CHUNKED else None
        self.chunk_offsets: dict[int, int | None] = {}  # chunk index -> byte offset in the file, as met
        self.chunk_table: np.ndarray | None = None  # every chunk's byte offset (-1: not allocated), read at first use

    def _file_offset(self, index: int) -> tuple[int | None, int]:
        """(byte offset of element ``index`` in the file or None if unknown, index of the end of its chunk)."""
        if self.chunk is None:
            base = self.dataset.id.get_offset()
            return (None if base is None else base + index * self.itemsize), len(self.dataset)
        c, within = divmod(index, self.chunk)
        if self.chunk_table is None:
            self.chunk_table = chunk_table(self.dataset)
        if self.chunk_table.size:
            base = int(self.chunk_table[c]) if self.chunk_table[c] >= 0 else None
        else:  # an h5py without chunk_iter: one look-up per chunk met
            if c not in self.chunk_offsets:
                self.chunk_offsets[c] = self.dataset.id.get_chunk_info_by_coord((c * self.chunk,)).byte_offset
            base = self.chunk_offsets[c]
        return (None if base is None else base + within * self.itemsize), (c + 1) * self.chunk

    def read(self, a: int, b: int) -> np.ndarray:
        a, b = int(a), int(b)
        if not self.mapped:
            return self.dataset[a:b]
        out = np.empty(b - a, self.dataset.dtype)
        raw = out.view(np.uint8)
        pos = a
        while pos < b:
            start, end = self._file_offset(pos)
            end = min(end, b)
            if start is None:  # not allocated in the file (never written): let HDF5 supply the fill value
                return self.dataset[a:b]
            raw[(pos - a) * self.itemsize : (end - a) * self.itemsize] = self.buffer[
                start : start + (end - pos) * self.itemsize
            ]
            pos = end
        return out


def chunk_table(dataset: h5py.Dataset) -> np.ndarray:
    """The byte offset in the file of each chunk of a chunked 1-D dataset, by chunk index (-1: not allocated), read
    in one pass over the chunk index; an empty array where h5py cannot iterate chunks (before h5py 3.8).

    One look-up per chunk instead costs a search of the index each time (0.2 ms per chunk of a 1.4 GB file's JPEG
    bytes, more as the file grows), and random reads meet a new chunk nearly every sample
    (docs/benchmarks.md#scale)."""
    chunk = dataset.chunks[0]
    table = np.full(-(-len(dataset) // chunk), -1, np.int64)

    def seen(info) -> None:
        table[info.chunk_offset[0] // chunk] = info.byte_offset

    try:
        dataset.id.chunk_iter(seen)
    except AttributeError:
        return np.zeros(0, np.int64)
    return table


def map_file(path: str) -> np.ndarray:
    """The bytes of the file at ``path`` as a read-only uint8 array over a memory map (empty file: empty array)."""
    with open(path, "rb") as f:
        try:
            return np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)
        except ValueError:  # an empty file cannot be mapped
            return np.zeros(0, np.uint8)
