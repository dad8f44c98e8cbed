"""Paths built from untrusted names (an annotation file's ``file_name``), kept inside their folder.

Separate from ``utils.paths``, which locates the repository's own files: this module judges names that come
from user data, for the converter (``data.coco_to_hdf5``) and the evaluator (``evaluate.coco_eval``).
"""

from __future__ import annotations

from pathlib import Path


def safe_image_path(images_dir: Path, file_name: str) -> Path | None:
    """``images_dir / file_name`` if it stays inside ``images_dir`` once ``..`` and symlinks are resolved (an
    absolute ``file_name`` does not), else None."""
    root = images_dir.resolve()
    try:
        p = (root / file_name).resolve()
    except (ValueError, OSError):  # a NUL byte, a symlink loop
        return None
    return p if p.is_relative_to(root) and p != root else None
