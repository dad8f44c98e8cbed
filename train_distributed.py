"""Train Simple Pose with DistributedDataParallel, one process per device, started by torchrun.

    torchrun --nproc_per_node=4 train_distributed.py --config config/simplepose_coco.yaml data.train=coco_train512.h5
    # several machines (run on each, node_rank 0..N-1):
    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 \
        train_distributed.py --config config/simplepose_coco.yaml ...

train.batch_size is per process and train.lr is per process, multiplied by the world size (linear scaling,
as the paper: 4 GPUs x batch 4 at 2.5e-5 x 4). NCCL on CUDA, gloo on CPU; SyncBN on CUDA (dist.sync_bn).
Under torchrun --max-restarts=K a restarted group resumes from the last checkpoint by itself.
"""

from engine.run import run
from utils.errors import cli_main


@cli_main
def main(argv: list[str] | None = None) -> int:
    return run("distributed", __doc__, argv)


if __name__ == "__main__":
    raise SystemExit(main())
