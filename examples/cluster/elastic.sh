#!/bin/bash
# Simple Pose as an elastic job on machines you start by hand (docs/cluster.md): run this on each machine, with the
# same HOST (any one of them, reachable by all) and RUN_ID. The group starts with 1 to MAX_NODES machines and is
# formed again when one joins or is lost (torchrun --nnodes=1:MAX_NODES, c10d rendezvous at HOST); each time it
# resumes from last.pt with the processes it has (train.resume=auto; train.batch_size is per process).
#
#   HOST=node1 RUN_ID=pose1 examples/cluster/elastic.sh --config config/simplepose_coco.yaml \
#       data.train=/shared/coco_train512.h5 train.out_dir=/shared/runs/pose1
#
# Give the arguments of train_distributed.py; train.out_dir on a filesystem every machine sees.
set -u
: "${HOST:?name the rendezvous machine: HOST=node1}" "${RUN_ID:?name the job: RUN_ID=pose1}"
export TORCH_ELASTIC_SHUTDOWN_TIMEOUT=${TORCH_ELASTIC_SHUTDOWN_TIMEOUT:-100}  # SIGTERM to SIGKILL, for last.pt
exec torchrun --nnodes=1:"${MAX_NODES:-4}" --nproc_per_node="${NPROC:-gpu}" --rdzv_backend=c10d \
    --rdzv_endpoint="$HOST:${RDZV_PORT:-29500}" --rdzv_id="$RUN_ID" --max-restarts="${MAX_RESTARTS:-10}" \
    -m simplepose.train_distributed "$@" train.resume=auto
