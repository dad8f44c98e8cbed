"""Paths built from untrusted names (an annotation file's ``file_name``), kept inside their folder.

Separate from ``tests/paths.py``, which locates the repository's own files for the tests and benches: this module
judges names that come from user data, for the converter (``data.coco_to_hdf5``) and the evaluator
(``evaluate.coco_eval``).

The names are judged, not the files: a name that climbs out of the folder (a ``..`` part, an absolute path, a
drive) is refused, whatever is there. Links in the folder are the user's own (a folder of ``ln -s`` links to shared
storage, a subset of a dataset) and are followed: an annotation file cannot make a link, only name a file.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath


def safe_image_path(images_dir: Path, file_name: str) -> Path | None:
    """``images_dir / file_name`` when the name stays inside ``images_dir`` by its words: relative, no ``..`` part
    (``/`` or ``\\`` separated), no drive, no NUL byte, not the folder itself; else None."""
    if not isinstance(file_name, str) or not file_name or "\x00" in file_name:
        return None
    windows = PureWindowsPath(file_name)
    posix = PurePosixPath(file_name)
    if posix.is_absolute() or windows.anchor or ".." in windows.parts or ".." in posix.parts:
        return None
    if all(part == "." for part in posix.parts):
        return None
    return images_dir / file_name
