"""What a file is, told by its first bytes (its signature), not by its name: for messages that refuse a file given
in the wrong place ("an HDF5 file, not a checkpoint").

    kind = file_kind(path)      # FileKind("hdf5", "an HDF5 file"), ..., FileKind("unknown", "")
    kind.name, kind.description

Only the signatures of the files a user of this project may hand to the wrong option are known: data files (HDF5,
NumPy), networks (PyTorch's ZIP archive or pickle, ONNX, safetensors), images, videos, and text (JSON, YAML). A file
whose bytes match none is ``unknown``; nothing here reads more than the first kilobytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from simplepose.utils.errors import UserError

HEAD_BYTES = 4096  # enough for every signature below (HDF5's may sit at 512, 1024 or 2048 after a user block)


@dataclass(frozen=True)
class FileKind:
    """``name``: a short identifier ("hdf5", "onnx", "jpeg", ...); ``description``: the kind in words, with its
    article ("an HDF5 file"), "" for ``unknown``."""

    name: str
    description: str


EMPTY = FileKind("empty", "an empty file (0 bytes)")
UNKNOWN = FileKind("unknown", "")

_HDF5 = b"\x89HDF\r\n\x1a\n"
# (signature at offset 0, kind) in the order they are tried
_PREFIXES: tuple[tuple[bytes, FileKind], ...] = (
    (b"\x89PNG\r\n\x1a\n", FileKind("png", "a PNG image")),
    (b"\xff\xd8\xff", FileKind("jpeg", "a JPEG image")),
    (b"GIF87a", FileKind("gif", "a GIF image")),
    (b"GIF89a", FileKind("gif", "a GIF image")),
    (b"II*\x00", FileKind("tiff", "a TIFF image")),
    (b"MM\x00*", FileKind("tiff", "a TIFF image")),
    (b"PK\x03\x04", FileKind("zip", "a ZIP archive")),
    (b"PK\x05\x06", FileKind("zip", "an empty ZIP archive")),
    (b"\x93NUMPY", FileKind("npy", "a NumPy array file (.npy)")),
    (b"\x1f\x8b", FileKind("gzip", "a gzip-compressed file")),
    (b"\x1a\x45\xdf\xa3", FileKind("mkv", "a Matroska/WebM video")),
)
_ONNX = FileKind("onnx", "an ONNX model")
_PICKLE = FileKind("pickle", "a Python pickle")


def file_kind(path: str | Path) -> FileKind:
    """The kind of the file at ``path`` from its first bytes; OSError if it cannot be read."""
    with open(path, "rb") as f:
        return kind_of(f.read(HEAD_BYTES))


def kind_of(head: bytes) -> FileKind:
    """The kind of a file that starts with ``head`` (its first ``HEAD_BYTES`` bytes, or all of a shorter file)."""
    if not head:
        return EMPTY
    if any(head[offset : offset + 8] == _HDF5 for offset in (0, 512, 1024, 2048)):
        return FileKind("hdf5", "an HDF5 file")
    for signature, kind in _PREFIXES:
        if head.startswith(signature):
            return kind
    if head[:4] == b"RIFF" and head[8:12] in (b"WEBP", b"AVI "):
        return FileKind("webp", "a WebP image") if head[8:12] == b"WEBP" else FileKind("avi", "an AVI video")
    if head[:2] == b"BM" and len(head) >= 14 and struct.unpack("<I", head[2:6])[0] >= 14:
        return FileKind("bmp", "a BMP image")
    if head[4:8] == b"ftyp":
        return FileKind("mp4", "an MP4/MOV video")
    if head[0] == 0x80 and len(head) > 1 and 2 <= head[1] <= 5:  # PROTO opcode: a pickle of protocol 2 to 5
        return _PICKLE
    if _looks_like_onnx(head):
        return _ONNX
    if _looks_like_safetensors(head):
        return FileKind("safetensors", "a safetensors file")
    return _text_kind(head)


def _looks_like_onnx(head: bytes) -> bool:
    """An ONNX ModelProto written by onnx or torch.onnx starts with field 1 (ir_version, a small varint), followed
    by another of its fields (producer_name, producer_version, domain, model_version, doc_string, graph, opset)."""
    return (
        len(head) >= 3
        and head[0] == 0x08
        and 1 <= head[1] <= 32
        and head[2] in (0x12, 0x1A, 0x22, 0x28, 0x32, 0x3A, 0x42)
    )


def _looks_like_safetensors(head: bytes) -> bool:
    """8 bytes of little-endian header length, then the JSON header itself."""
    return len(head) >= 10 and head[8:10] == b'{"' and 0 < struct.unpack("<Q", head[:8])[0] < 100_000_000


def _text_kind(head: bytes) -> FileKind:
    if b"\x00" in head:
        return UNKNOWN
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # not merely a character cut at the end of the head
            return UNKNOWN
        text = head[: e.start].decode("utf-8")
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped:
        return FileKind("text", "a text file of white space")
    if stripped[0] in "{[":
        return FileKind("json", "a JSON text file")
    printable = sum(c.isprintable() or c in "\t\r\n" for c in text)
    return FileKind("text", "a text file (YAML or other)") if printable >= 0.95 * len(text) else UNKNOWN


def existing_file_kind(path: Path, what: str, error: type[UserError], missing_hint: str = "") -> FileKind:
    """``file_kind`` of a file a user named as ``what`` (``"checkpoint"``, ``"ONNX model"``): ``error`` naming the
    file when it is not there (``what path not found`` and ``missing_hint``) or cannot be read."""
    if not path.is_file():
        raise error(f"{what} {path} not found{missing_hint}", file=path)
    try:
        return file_kind(path)
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror or e}", file=path) from None
