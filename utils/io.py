"""Atomic file writes: a temporary file in the same folder, flushed to disk, then renamed over the target.

A crash at any moment leaves either the old file or the new one, never a half-written one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from utils.errors import UserError


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` for the caller to write (by name, e.g. with h5py); on success it
    is flushed to disk, given the usual permissions and renamed over ``path``; on any error it is removed."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror} (check that the folder is writable)") from None
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; give it the usual permissions
        os.replace(tmp, path)
    except OSError as e:
        _remove_quietly(tmp)
        raise UserError(f"cannot write {path}: {e.strerror}; the previous file, if any, is unchanged") from None
    except BaseException:
        _remove_quietly(tmp)
        raise


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write(f)`` on a temporary binary file, then rename it to ``path``."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        write(f)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _remove_quietly(p: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(p)
