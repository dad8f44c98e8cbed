"""Skeleton files: the YAML files of ``config/skeletons/`` (or any path) read into a ``config.skeleton.Skeleton``.

    skeleton = load_skeleton("coco")          # a name in config/skeletons/, or the path of a YAML file
    skeleton = skeleton_of(cfg)               # the one cfg.data.skeleton names

The file format: docs/skeleton.md#skeleton-files; its validation is
``config.skeleton_definition.skeleton_from_dict``'s (the same for the plain-dict form checkpoints and HDF5 files
carry).
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from simplepose.config.skeleton import SKELETON_DIR, Skeleton, SkeletonFileError
from simplepose.config.skeleton_definition import skeleton_from_dict


def resolve_skeleton_path(name_or_path: str | Path) -> Path:
    """``config/skeletons/NAME.yaml`` for a bare name, else the given path; UserError when there is no such file."""
    text = str(name_or_path)
    if not text:
        raise SkeletonFileError(
            "data.skeleton is empty: give a name in config/skeletons/ (e.g. coco) or a YAML file path",
            key="data.skeleton",
        )
    is_name = "/" not in text and "\\" not in text and not text.endswith((".yaml", ".yml"))
    path = SKELETON_DIR / f"{text}.yaml" if is_name else Path(text)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in SKELETON_DIR.glob("*.yaml")))
        raise SkeletonFileError(
            f"skeleton {text!r}: no file {path}; give a name in config/skeletons/ ({known}) or the path of a "
            "skeleton YAML file (format: docs/skeleton.md#skeleton-files)",
            file=path,
            key="data.skeleton",
        )
    return path


def load_skeleton(name_or_path: str | Path) -> Skeleton:
    """The skeleton of ``config/skeletons/NAME.yaml`` or of a YAML file path (read once per file version)."""
    path = resolve_skeleton_path(name_or_path).resolve()
    stat = path.stat()
    return _load_file(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=32)
def _load_file(path: Path, mtime_ns: int, size: int) -> Skeleton:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise SkeletonFileError(f"skeleton file {path} is not valid YAML: {e}", file=path) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SkeletonFileError(f"cannot read skeleton file {path}: {e}", file=path) from None
    if isinstance(data, dict) and "name" not in data:
        data = {"name": path.stem, **data}
    return skeleton_from_dict(data, str(path))


def skeleton_of(cfg) -> Skeleton:
    """The skeleton a whole ``config.schema.Config`` names (``data.skeleton``)."""
    return load_skeleton(cfg.data.skeleton)
