"""Atomic file writes: a temporary file in the same folder, flushed to disk, then renamed over the target.

A crash at any moment leaves either the old file or the new one, never a half-written one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from simplepose.utils.errors import UserError


class WriteError(UserError):
    """A file that could not be written: ``file``, and ``errno`` the OS error's code (e.g. ``errno.ENOSPC``)."""

    def __init__(self, message: str, file: str | Path, errno: int | None) -> None:
        super().__init__(message, file=file)
        self.errno = errno


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path`` for the caller to write (by name, e.g. with h5py); on success it
    is flushed to disk, given the usual permissions and renamed over ``path``; on any error it is removed.
    ``suffix``: the temporary name's ending (a writer that picks the format by extension needs ``.tmp.mp4``)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
        os.close(fd)
    except OSError as e:
        raise WriteError(write_error_message(path, e), path, e.errno) from None
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
        raise WriteError(
            write_error_message(path, e) + "; the previous file, if any, is unchanged", path, e.errno
        ) from None
    except BaseException:
        _remove_quietly(tmp)
        raise


_ADVICE = {
    errno.ENOSPC: "the disk is full: free space there or write to another disk",
    errno.EDQUOT: "the disk quota is exhausted: free space there or write to another disk",
    errno.EROFS: "the file system is read-only: write to a writable folder",
    errno.EACCES: "permission denied: make the folder writable or write to another one",
    errno.EPERM: "permission denied: make the folder writable or write to another one",
}
OUT_OF_SPACE_OR_READ_ONLY = frozenset(_ADVICE)
_PATH_ADVICE = {
    errno.EEXIST: "a file of that name is in the way where a folder is needed: name a folder, or a path below one",
    errno.ENOTDIR: "a part of the path is a file, not a folder: name a path below a folder",
    errno.EISDIR: "it is a folder: name a file inside it",
}


def write_error_message(path: str | Path, error: OSError) -> str:
    """``cannot write PATH: <reason> (<errno name>); <what to do>`` for an OSError met while writing PATH."""
    name = errno.errorcode.get(error.errno or 0, "")
    reason = error.strerror or str(error)
    advice = _ADVICE.get(error.errno or 0) or _PATH_ADVICE.get(
        error.errno or 0, "check that the folder exists and is writable"
    )
    return f"cannot write {path}: {reason}{f' ({name})' if name else ''}; {advice}"


@contextlib.contextmanager
def disk_errors(hint: str = "") -> Iterator[None]:
    """Turn an OSError of a full disk, a read-only file system or a refused permission raised inside the block
    into a WriteError naming the file (``hint`` is appended: what to do next in the caller's terms)."""
    try:
        yield
    except OSError as e:
        if e.errno not in OUT_OF_SPACE_OR_READ_ONLY:
            raise
        path = os.fsdecode(e.filename) if e.filename else "a file"
        raise WriteError(write_error_message(path, e) + (f"; {hint}" if hint else ""), path, e.errno) from None


def check_writable(folder: str | Path, option: str = "") -> None:
    """Prove a file can be made in ``folder`` (making it, and its missing parents, for the proof only: they are
    removed again, so a command that fails later leaves no empty folder); WriteError naming it (as ``option``, the
    command's option, when given) if not, and for a file where the folder should be."""
    folder = Path(folder)
    named = f"{option} {folder}" if option else str(folder)
    if folder.exists() and not folder.is_dir():
        raise WriteError(
            f"{named} is a file, not a folder: name a folder to write into (a missing one is made)", folder, None
        )
    made = missing_folders(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise WriteError(write_error_message(named, e), folder, e.errno) from None
    finally:
        remove_empty_folders(made)


def missing_folders(folder: str | Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, innermost first (what ``mkdir(parents=True)`` would make)."""
    missing = []
    for p in (Path(folder), *Path(folder).parents):
        if p.exists() or p == p.parent:
            break
        missing.append(p)
    return missing


def remove_empty_folders(folders: list[Path]) -> None:
    """Remove each of ``folders`` (innermost first) that is empty; one that holds anything stays, and so do its
    parents."""
    for p in folders:
        try:
            p.rmdir()
        except OSError:
            return


@contextlib.contextmanager
def no_empty_folders_on_failure(*paths: str | Path | None) -> Iterator[None]:
    """The folders of ``paths`` that do not exist yet are removed again, if still empty, when the block fails: a
    command that stops leaves no empty output folder behind (None entries are skipped)."""
    made = [missing_folders(p) for p in paths if p is not None]
    try:
        yield
    except BaseException:
        for folders in made:
            remove_empty_folders(folders)
        raise


def refuse_to_overwrite(files: list[Path], options: str = "--out") -> None:
    """UserError naming the first of a command's output ``files`` that exists: no earlier result is replaced unless
    the user says so (``--overwrite``), or writes elsewhere (``options``: the command's output options)."""
    existing = [Path(f) for f in files if Path(f).exists()]
    if existing:
        more = f" (and {len(existing) - 1} more of the files this command writes)" if len(existing) > 1 else ""
        raise UserError(
            f"{existing[0]} exists{more}: an earlier result is never replaced silently; give --overwrite to replace "
            f"it, or another {options}",
            file=existing[0],
        )


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write(f)`` on a temporary binary file, then rename it to ``path``."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        write(f)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    def write(f: IO[bytes]) -> None:
        f.write(data)

    atomic_write(path, write)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _remove_quietly(p: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(p)
