"""The quick start's data: a synthetic COCO-format dataset, made and converted once, then reused.

``python -m simplepose.train`` with no --config and no data.train calls ``prepare_synthetic_data`` and applies the
settings it returns; the files are cached under ``data.synthetic_dir`` and rebuilt only when their settings
change. The figures are of ``data.skeleton`` (COCO persons by default;
``python -m simplepose.train data.skeleton=crowdpose`` trains on synthetic CrowdPose figures).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from simplepose.config.schema import DataConfig
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.conversion import Source, convert
from simplepose.data.h5_format import H5_FORMAT_VERSION
from simplepose.data.synthetic_images import generate
from simplepose.utils.io import atomic_write_text

log = logging.getLogger(__name__)


def prepare_synthetic_data(d: DataConfig) -> dict[str, str]:
    """Make (or reuse) the synthetic dataset and its HDF5 files for ``d.input_size``; return the data settings
    that point at them, as dotted config keys: ``data.train``, ``data.val``, ``data.val_images``,
    ``data.val_annotations``. ``d`` itself is not changed."""
    root = Path(d.synthetic_dir)
    images, ann = root / "images", root / "annotations"
    wanted: dict[str, object] = {
        "num_images": d.synthetic_images,
        "seed": d.synthetic_seed,
        "format_version": H5_FORMAT_VERSION,
    }
    if d.skeleton != "coco":  # COCO's caches made before skeletons existed stay valid
        wanted["skeleton"] = d.skeleton
    marker = root / "synthetic.json"
    if not marker.is_file() or json.loads(marker.read_text()) != wanted:
        log.info("making %d synthetic images in %s (once)", d.synthetic_images, root)
        generate(root, d.synthetic_images, d.synthetic_seed, skeleton=load_skeleton(d.skeleton))
        for old in root.glob("*.h5"):
            old.unlink()
        atomic_write_text(marker, json.dumps(wanted))
    for split in ("train", "val"):
        h5 = root / f"{split}{d.input_size}.h5"
        if not h5.is_file():
            convert(
                [Source(images, ann / f"person_keypoints_{split}.json")],
                h5,
                input_size=d.input_size,
                split=f"synthetic-{split}",
                progress=False,
                skeleton=d.skeleton,
            )
    return {
        "data.train": str(root / f"train{d.input_size}.h5"),
        "data.val": str(root / f"val{d.input_size}.h5"),
        "data.val_images": str(images),
        "data.val_annotations": str(ann / "person_keypoints_val.json"),
    }
