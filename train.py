"""Train Simple Pose on one device: the first GPU when there is one, else the CPU.

    simplepose train                                  # quick start: synthetic data, small model, CPU minutes
    simplepose train --config config/simplepose_coco.yaml data.train=coco_train512.h5 \\
        data.val_images=coco/val2017 data.val_annotations=coco/annotations/person_keypoints_val2017.json

Every config value can be overridden with key=value (see config/schema.py); train.resume=auto continues a run.
"""

import argparse

if not __package__:  # run as a script from a checkout: the package it imports must be this checkout's
    import installed_tree

    installed_tree.require()

from simplepose.utils.openmp import prefer_short_spin  # noqa: E402

prefer_short_spin()  # before torch loads: OpenMP reads its settings then

from simplepose.engine import run  # noqa: E402
from simplepose.utils.errors import cli_main  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    return run.build_parser(__doc__, "single")


@cli_main
def main(argv: list[str] | None = None) -> int:
    return run.run("single", __doc__, argv)


if __name__ == "__main__":
    raise SystemExit(main())
