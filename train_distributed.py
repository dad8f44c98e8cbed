"""Train Simple Pose with DistributedDataParallel, one process per device, started by torchrun.

    torchrun --nproc_per_node=4 -m simplepose train-distributed --config config/simplepose_coco.yaml \\
        data.train=coco_train512.h5
    # several machines (run on each; the same command everywhere, train.out_dir on a shared filesystem):
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 --rdzv_id=pose1 \\
        -m simplepose train-distributed --config config/simplepose_coco.yaml ...
    # elastic: a worker that dies restarts the whole group, which resumes from out_dir/last.pt by itself
    torchrun --nproc_per_node=4 --max-restarts=3 -m simplepose train-distributed ... train.checkpoint_every_steps=500

train.batch_size is per process (global batch = batch_size x processes) and train.lr is per process,
multiplied by the world size (linear scaling as the paper: 4 GPUs x batch 4 at 2.5e-5 x 4;
train.lr_scale_world_size=false keeps it as given). NCCL on CUDA, gloo on CPU; SyncBN on CUDA (dist.sync_bn).
Rank 0 alone writes checkpoints and metrics; train.resume=auto continues a run in any number of processes.
Without torchrun this trains in one process, like train.py.
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
    return run.build_parser(__doc__, "distributed")


@cli_main
def main(argv: list[str] | None = None) -> int:
    return run.run("distributed", __doc__, argv)


if __name__ == "__main__":
    raise SystemExit(main())
