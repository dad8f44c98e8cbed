#!/bin/bash
# Simple Pose on SLURM (docs/cluster.md): one torchrun agent per node, one training process per GPU, rendezvous
# (c10d) at the job's first node. 120 s before the time limit SLURM sends SIGTERM to this script (B:), which passes it
# once to every torchrun agent; the training stops at its next step with last.pt written there, and the script
# requeues the job, which continues from last.pt (train.resume=auto: also the first start, in an empty folder).
#
#   sbatch examples/cluster/slurm_train.sh --config config/simplepose_coco.yaml data.train=/shared/coco_train512.h5 \
#       train.out_dir=/shared/runs/pose1
#
# Give the arguments of train_distributed.py; train.out_dir must be on a filesystem every node sees, and the
# requeued job must run the same command (sbatch keeps it). Edit the #SBATCH lines for your cluster.
#SBATCH --job-name=simplepose
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH --time=24:00:00
#SBATCH --signal=B:TERM@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=simplepose-%j.out

set -u
# the processes per node: one per GPU SLURM gave (NPROC overrides, e.g. NPROC=2 on CPU nodes)
nproc=${NPROC:-${SLURM_GPUS_ON_NODE:-1}}
head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
port=${RDZV_PORT:-29500}

stopping=""
stop() {
    [ -n "$stopping" ] && return  # once: a second SIGTERM to torchrun would cut its workers' stop short
    stopping=1
    echo "$(date -u +%FT%TZ) SIGTERM: the run stops at its next step, with last.pt; then the job is requeued"
    kill -TERM "$launch"
}
trap stop TERM

# how long torchrun lets its workers finish the step and write last.pt after a SIGTERM before it kills them, under
# the 120 s of --signal above (torchrun's --shutdown-timeout; a torchrun older than that option keeps 30 s); a worker
# that fails restarts the group (--max-restarts), which resumes from last.pt by itself
export TORCH_ELASTIC_SHUTDOWN_TIMEOUT=100
srun --kill-on-bad-exit=1 torchrun --nnodes="$SLURM_NNODES" --nproc_per_node="$nproc" --rdzv_backend=c10d \
    --rdzv_endpoint="$head_node:$port" --rdzv_id="$SLURM_JOB_ID" --max-restarts=3 \
    -m simplepose.train_distributed "$@" train.resume=auto &
launch=$!
wait "$launch"
status=$?
if [ -n "$stopping" ]; then
    wait "$launch"  # the first wait ended when the signal came; this one ends with the run
    status=$?
    scontrol requeue "$SLURM_JOB_ID"
fi
exit "$status"
