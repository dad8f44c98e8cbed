"""The images to predict on when there are no annotations: a folder, or a COCO image-info JSON.

An image list is ``{image id: {"id", "file_name"[, "width", "height"]}}``, the shape of pycocotools' ``coco.imgs``,
so that ``evaluate.coco_eval`` runs it the same way as an annotated set.

Ids of a plain folder: the number each file name ends with (COCO's ``000000000139.jpg`` -> 139) when every name
ends with one and no two share it, else 1..N in sorted file-name order. An image-info JSON (COCO's
``image_info_test-dev2017.json``: ``images`` with id, file_name, width, height; no annotations) gives its own ids.
"""

from __future__ import annotations

import re
from pathlib import Path

from simplepose.data.coco_annotations import load_image_info
from simplepose.utils.errors import UserError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}
_TRAILING_NUMBER = re.compile(r"(\d+)$")


def image_files(folder: Path) -> list[Path]:
    """The image files of ``folder`` (by suffix, not recursive), sorted by name; UserError when there are none."""
    if not folder.is_dir():
        raise UserError(f"image folder {folder} not found")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not files:
        raise UserError(f"folder {folder} holds no images ({', '.join(sorted(IMAGE_SUFFIXES))})")
    return files


def folder_image_list(folder: str | Path) -> tuple[dict[int, dict], str]:
    """(image list of the folder's images, how their ids were made: a phrase for the output)."""
    files = image_files(Path(folder))
    ids, rule = file_image_ids(files)
    return {i: {"id": i, "file_name": f.name} for i, f in zip(ids, files)}, rule


def file_image_ids(files: list[Path]) -> tuple[list[int], str]:
    """(the image id of each file, how they were made: a phrase for the output), by the rule above."""
    found = [_TRAILING_NUMBER.search(f.stem) for f in files]
    numbers = [int(m.group(1)) for m in found if m is not None]
    if len(numbers) == len(files) and len(set(numbers)) == len(files):
        return numbers, "the number each file name ends with (000000000139.jpg -> 139)"
    rule = "1..N in sorted file-name order (not every file name ends with a number of its own)"
    return list(range(1, len(files) + 1)), rule


def image_info_list(path: str | Path) -> dict[int, dict]:
    """Image list of a COCO image-info JSON (validated: ids, file names, sizes)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(
            f"image-info file {path} not found (a COCO JSON with an 'images' list, e.g. image_info_test-dev2017.json)"
        )
    return {img["id"]: img for img in load_image_info(path)}
