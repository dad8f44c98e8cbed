"""The quick start's data: a synthetic COCO-format dataset, made and converted once, then reused.

``python train.py`` with no --config and no data.train calls ``prepare_synthetic_data``; the result is cached
under ``data.synthetic_dir`` and rebuilt only when its settings change.
"""

from __future__ import annotations

import json
from pathlib import Path

from config.schema import Config
from utils.io import atomic_write_text


def prepare_synthetic_data(cfg: Config) -> None:
    """Make (or reuse) the synthetic dataset and its HDF5 files; point ``cfg.data`` at them."""
    from data.coco_to_hdf5 import Source, convert
    from data.synthetic import generate

    d = cfg.data
    root = Path(d.synthetic_dir)
    images, ann = root / "images", root / "annotations"
    wanted = {"num_images": d.synthetic_images, "seed": d.synthetic_seed}
    marker = root / "synthetic.json"
    if not marker.is_file() or json.loads(marker.read_text()) != wanted:
        print(f"making {d.synthetic_images} synthetic images in {root} (once)")
        generate(root, d.synthetic_images, d.synthetic_seed)
        for old in root.glob("*.h5"):
            old.unlink()
        atomic_write_text(marker, json.dumps(wanted))
    for split in ("train", "val"):
        h5 = root / f"{split}{d.input_size}.h5"
        if not h5.is_file():
            convert([Source(images, ann / f"person_keypoints_{split}.json")], h5, input_size=d.input_size,
                    split=f"synthetic-{split}", progress=False)  # fmt: skip
    d.train = str(root / f"train{d.input_size}.h5")
    d.val = str(root / f"val{d.input_size}.h5")
    d.val_images = str(images)
    d.val_annotations = str(ann / "person_keypoints_val.json")
