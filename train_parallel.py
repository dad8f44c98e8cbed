"""Train Simple Pose with nn.DataParallel over the visible GPUs, the loss balanced across replicas.

Each replica runs the model and the loss on its slice of the batch and returns only loss sums, so the
multi-scale outputs are never gathered on the first GPU (the original's "load balancing"); the sums over
all replicas divided by the global batch give the same loss and gradients as one device. Without GPUs this
trains on the CPU like train.py. Prefer train_distributed.py (DDP) when you can: it is faster and syncs BN.

    simplepose train-parallel --config config/simplepose_coco.yaml data.train=coco_train512.h5 train.batch_size=16
    simplepose train-parallel ... dist.dp_device_ids=[0,1,2,3]

Here train.batch_size is the GLOBAL batch, split over the GPUs (16 on 4 GPUs = 4 per GPU), and train.lr is
used as given (one process: no world-size scaling). Each GPU normalises BatchNorm over its own slice.
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
    return run.build_parser(__doc__, "data_parallel")


@cli_main
def main(argv: list[str] | None = None) -> int:
    return run.run("data_parallel", __doc__, argv)


if __name__ == "__main__":
    raise SystemExit(main())
