"""Multi-process training on the synthetic sample (CPU, gloo, tiny model): torchrun DDP against one process with
the world-size-times larger batch, NaN on one rank, resume across world sizes, an elastic restart after a killed
worker, the DataParallel loss balancing and the SyncBN conversion."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time

import pytest
import torch
from torch import nn

from simplepose.checkpoint.format import Checkpoint
from simplepose.engine.launch import DataParallelBalanced, ModelWithLoss, sync_batchnorm
from simplepose.engine.logger import read_metrics
from tests.helpers import (
    COCO,
    flat_optimizer_state,
    saved_state,
    subprocess_env,
    tiny_cfg,
    tiny_run_args,
    torchrun_command,
)
from tests.paths import REPO_ROOT

# per process: batch 2, 4 steps, a checkpoint every 2 steps; BatchNorm in eval mode makes N x b == 1 x N*b exact
RUN = ["train.epochs=1", "train.max_steps_per_epoch=4", "train.checkpoint_every_steps=2", "train.optimizer=sgd",
       "train.lr=0.01", "train.bn_eval=true", "train.ema=0.5", "train.ema_warmup_steps=1"]  # fmt: skip
TIMES: dict[str, float] = {}


def _run(command: list[str], label: str) -> subprocess.CompletedProcess:
    env = subprocess_env(OMP_NUM_THREADS="1")
    start = time.perf_counter()
    r = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    TIMES[label] = time.perf_counter() - start
    print(f"{label}: {TIMES[label]:.1f} s wall")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def torchrun(script: str | list[str], h5, out_dir, *overrides: str, nproc: int = 2, max_restarts: int = 0,
             label: str = ""):  # fmt: skip
    program = [script] if isinstance(script, str) else script
    command = torchrun_command([*program, *tiny_run_args(h5, out_dir, *overrides)], nproc, max_restarts)
    return _run(command, label or f"torchrun x{nproc} {' '.join(program)}")


def with_faults(*flags: str) -> list[str]:
    """The distributed trainer with injected faults (tests/harness/faulty_trainer.py)."""
    return ["-m", "tests.harness.faulty_trainer", "--launcher", "distributed", *flags, "--"]


def one_process(script: str, h5, out_dir, *overrides: str, label: str = ""):
    return _run([sys.executable, script, *tiny_run_args(h5, out_dir, *overrides)], label or f"1 process {script}")


def train_records(out_dir) -> list[dict]:
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r["kind"] == "train"]


def assert_close_states(a: dict, b: dict, rtol=1e-4, atol=1e-6):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k].double(), b[k].double(), rtol=rtol, atol=atol), k


@pytest.fixture(scope="module")
def two_process_run(synthetic_h5_64, tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp2")
    r = torchrun("train_distributed.py", synthetic_h5_64, out, *RUN, label="2 processes x batch 2 (torchrun)")
    return out, r


def test_two_processes_equal_one_process_with_twice_the_batch(synthetic_h5_64, two_process_run, tmp_path):
    out2, r2 = two_process_run
    assert "SyncBatchNorm needs CUDA" in r2.stdout
    # train_parallel.py on the CPU: one process, the balanced wrapper, train.batch_size is the global batch; the
    # LR is not scaled there, so it gets 2x the per-process LR that DDP scales by its world size
    # (docs/training.md#schedule)
    r1 = one_process("train_parallel.py", synthetic_h5_64, tmp_path, *RUN, "train.batch_size=4", "train.lr=0.02",
                     label="1 process x batch 4 (train_parallel.py)")  # fmt: skip
    assert "no GPU visible" in r1.stdout
    two, one = Checkpoint.load(out2 / "last.pt"), Checkpoint.load(tmp_path / "last.pt")
    assert saved_state(two).world_size == 2 and saved_state(one).world_size == 1
    assert saved_state(two).position.global_step == saved_state(one).position.global_step == 4
    assert saved_state(two).ranks_in_sync is True  # every rank held bit-identical weights and averages

    from simplepose.engine.process_setup import seed_everything
    from simplepose.models import build_model

    seed_everything(0, False)
    init = build_model(tiny_cfg(synthetic_h5_64, tmp_path)).state_dict()
    moved = max((two.model[k] - init[k]).abs().max().item() for k in init if init[k].is_floating_point())
    assert moved > 1e-3  # training changed the weights, so equality below is not trivial
    assert_close_states(two.model, one.model)
    # the weight average (train.ema) of two processes is that of one process with their whole batch
    averages = saved_state(two).ema, saved_state(one).ema
    assert averages[0]["updates"] == averages[1]["updates"] == 4
    assert_close_states(averages[0]["model"], averages[1]["model"])
    floats = [k for k in init if init[k].is_floating_point()]
    assert max((averages[0]["model"][k] - two.model[k]).abs().max().item() for k in floats) > 1e-4  # not the weights
    states = (saved_state(two).optimizer["state"].values(), saved_state(one).optimizer["state"].values())
    momenta = [(a["momentum_buffer"], b["momentum_buffer"]) for a, b in zip(*states)]
    assert momenta and all(torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in momenta)
    # the logged loss is the mean over ranks: the loss of the whole global batch
    for a, b in zip(train_records(out2), train_records(tmp_path)):
        assert a["global_step"] == b["global_step"] and a["loss"] == pytest.approx(b["loss"], rel=1e-4)
    print(f"wall time: 2 processes {TIMES['2 processes x batch 2 (torchrun)']:.1f} s, "
          f"1 process {TIMES['1 process x batch 4 (train_parallel.py)']:.1f} s")  # fmt: skip


@pytest.fixture(scope="module")
def nan_run(synthetic_h5_64, tmp_path_factory, synthetic_sample_images, synthetic_sample_annotations):
    out = tmp_path_factory.mktemp("nan")
    validation = ["train.val_every=1", f"data.val={synthetic_h5_64}", f"data.val_images={synthetic_sample_images}",
                  f"data.val_annotations={synthetic_sample_annotations}", "eval.max_images=4"]  # fmt: skip
    # plain BatchNorm (no SyncBN on the CPU, no train.bn_eval) and a weight average
    r = torchrun(with_faults("--nan-steps", "1", "--nan-rank", "1"), synthetic_h5_64, out, "train.epochs=1",
                 "train.max_steps_per_epoch=3", "train.ema=0.5", "train.ema_warmup_steps=1", *validation)  # fmt: skip
    return out, r


def test_nan_on_one_rank_makes_every_rank_skip_the_step(nan_run):
    out, r = nan_run
    assert r.stdout.count("step skipped") == 1
    ckpt = Checkpoint.load(out / "last.pt")
    assert saved_state(ckpt).position.counters["skipped_nonfinite"] == 1 and saved_state(ckpt).position.global_step == 3
    # rank 0 skipped too (it saw a finite loss); the rank check covers the BatchNorm statistics and the average
    assert saved_state(ckpt).ranks_in_sync is True and "statistics averaged after every optimiser step" in r.stdout
    average = saved_state(ckpt).ema
    assert average["updates"] == 2
    for state in (ckpt.model, average["model"]):
        assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())
    losses = [rec["loss"] for rec in train_records(out)]
    assert losses[1] == "nan" and all(isinstance(x, float) for x in losses[::2])
    # validation ran sharded over both ranks: one record, the loss over the val file and COCO AP of 4 images
    val = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"kind": "val"' in line]
    assert len(val) == 1 and val[0]["val_loss"] > 0 and 0 <= val[0]["AP"] <= 1
    assert json.loads((out / "val_results_epoch0.json").read_text()) is not None


def test_without_syncbn_every_process_ends_each_step_with_the_same_statistics_and_average(tmp_path):
    """Two processes (gloo, CPU) train plain BatchNorm on batches of their own, two micro-batches a step: each
    process's statistics follow all of its own micro-batches (DDP broadcasts no buffers: engine/launch.py), and
    after each step they are replaced by the mean of both (the rank check, which covers buffers, saw them differ
    before), so both hold bit-identical networks and weight averages (tests/harness/plain_batchnorm_ranks.py)."""
    from tests.harness.plain_batchnorm_ranks import run_rank

    start = time.perf_counter()
    # forked: the children start with this process's modules imported (each sets one thread before any torch work)
    torch.multiprocessing.start_processes(run_rank, args=(2, str(tmp_path), 2), nprocs=2, start_method="fork")
    print(f"2 processes: {time.perf_counter() - start:.1f} s wall")
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    assert all(not r["in_sync_before"] and r["in_sync_after"] for r in ranks)
    for r in ranks:  # every micro-batch of the step counted, on rank 1 too
        assert all(torch.allclose(got, want, rtol=1e-6, atol=1e-7) for got, want in zip(r["before"], r["own"]))
    own = [r["before"] for r in ranks]
    assert not torch.allclose(own[0][0], own[1][0], atol=0.1)  # the ranks' own statistics were far apart
    stats = [ranks[0]["model"][k] for k in ("1.running_mean", "1.running_var")]
    for mean, a, b in zip(stats, own[0], own[1]):
        assert torch.allclose(mean, (a + b) / 2, rtol=1e-6, atol=0)
    for kind in ("model", "average"):
        a, b = ranks[0][kind], ranks[1][kind]
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), kind
    assert not torch.equal(ranks[0]["average"]["1.running_mean"], stats[0])  # the average is not the network


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_two_process_checkpoint_resumes_in_one_and_in_two(nan_run, synthetic_h5_64, tmp_path, nproc):
    src, _ = nan_run
    (tmp_path / "last.pt").write_bytes((src / "last.pt").read_bytes())
    resume = ["train.epochs=2", "train.max_steps_per_epoch=3", "train.resume=auto"]
    if nproc == 1:
        r = one_process("train_distributed.py", synthetic_h5_64, tmp_path, *resume)
        assert "not started by torchrun" in r.stdout
    else:
        r = torchrun("train_distributed.py", synthetic_h5_64, tmp_path, *resume, nproc=2)
    assert "resumed from" in r.stdout and "global step 3" in r.stdout
    state = saved_state(tmp_path / "last.pt")
    assert (state.position.epoch, state.position.global_step, state.world_size) == (2, 6, nproc)
    assert state.position.counters["skipped_nonfinite"] == 1  # carried over
    assert [rec["global_step"] for rec in train_records(tmp_path)] == [4, 5, 6]


def test_a_killed_worker_restarts_and_resumes_from_the_last_checkpoint(synthetic_h5_64, two_process_run, tmp_path):
    stale = tmp_path / ".last.pt.killed.tmp"  # what a worker killed while writing a checkpoint leaves behind
    stale.write_bytes(b"half a checkpoint")
    r = torchrun(with_faults("--exit-step", "3", "--exit-rank", "1"), synthetic_h5_64, tmp_path, *RUN, max_restarts=1,
                 label="2 processes, rank 1 killed at step 3, --max-restarts=1")  # fmt: skip
    assert "rank 1 dies at global step 3" in r.stdout
    assert "resumed from" in r.stdout and "step 2, global step 2" in r.stdout
    assert not stale.exists()
    ckpt = Checkpoint.load(tmp_path / "last.pt")
    state = saved_state(ckpt)
    assert (state.position.epoch, state.position.global_step) == (1, 4) and state.ranks_in_sync is True
    # the metrics lost the dead attempt's records past its checkpoint: every step is logged once
    assert [rec["global_step"] for rec in train_records(tmp_path)] == [1, 2, 3, 4]
    # only the work since the checkpoint was redone, exactly: the same weights as the uninterrupted run
    reference = Checkpoint.load(two_process_run[0] / "last.pt")
    assert_close_states(reference.model, ckpt.model, rtol=0, atol=0)


def test_a_restart_before_the_first_checkpoint_starts_the_run_again_in_its_folder(synthetic_h5_64, two_process_run,
                                                                                   tmp_path):  # fmt: skip
    """Rank 1 dies at global step 1, before any last.pt (every 2 steps): the restarted group is the same run, so the
    folder its first attempt wrote (config.yaml, metrics) is its own; it starts again there and ends as the
    uninterrupted run."""
    r = torchrun(with_faults("--exit-step", "1", "--exit-rank", "1"), synthetic_h5_64, tmp_path, *RUN, max_restarts=1,
                 label="2 processes, rank 1 killed at step 1 (no checkpoint yet), --max-restarts=1")  # fmt: skip
    assert "rank 1 dies at global step 1" in r.stdout and "holds no last.pt yet" in r.stdout
    assert "already holds a run" not in r.stderr
    ckpt = Checkpoint.load(tmp_path / "last.pt")
    assert saved_state(ckpt).position.global_step == 4
    assert [rec["global_step"] for rec in train_records(tmp_path)] == [1, 2, 3, 4]
    assert_close_states(Checkpoint.load(two_process_run[0] / "last.pt").model, ckpt.model, rtol=0, atol=0)


def test_sigterm_to_torchrun_stops_both_ranks_at_one_step_and_the_resume_ends_as_the_unstopped_run(
    synthetic_h5_64, two_process_run, tmp_path
):
    """SIGTERM to torchrun's agent (a cluster stopping the job; it sends it on to both processes) at global step 1:
    both ranks stop at one step boundary (step 3: the ranks agree one step after a request), rank 0 writes last.pt
    there (a step that is no checkpoint's otherwise) and gives the command that continues; that resume, in 2
    processes, ends bit-identical to the run never stopped, with the same records (metrics.jsonl)."""
    command = torchrun_command([*with_faults("--signal-step", "1", "--signal-parent"),
                                *tiny_run_args(synthetic_h5_64, tmp_path, *RUN)], 2)  # fmt: skip
    r = subprocess.run(command, cwd=REPO_ROOT, env=subprocess_env(OMP_NUM_THREADS="1"), capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert "rank 0 sends SIGTERM to its parent at global step 1" in r.stdout
    assert f'File "{REPO_ROOT}' not in r.stderr, r.stderr[-3000:]  # torchrun prints its own SignalException
    again = shlex.join(["torchrun", "--nproc_per_node=2", "train_distributed.py",
                        *tiny_run_args(synthetic_h5_64, tmp_path, *RUN), "train.resume=auto"])  # fmt: skip
    # step 3; step 2 when rank 1 got the forwarded signal before it ended step 1 (a loaded machine)
    step = 2 if "stopped at epoch 0, step 2 (global step 2)" in r.stderr else 3
    stopped = (f"terminated (SIGTERM): stopped at epoch 0, step {step} (global step {step}), where "
               f"{tmp_path / 'last.pt'} was written; continue the run with: {again}")  # fmt: skip
    assert r.stderr.count(stopped) == 1 and r.stderr.count("SIGTERM received") == 1, r.stderr[-3000:]
    assert saved_state(tmp_path / "last.pt").position.global_step == step
    torchrun("train_distributed.py", synthetic_h5_64, tmp_path, *RUN, "train.resume=auto")
    final, reference = Checkpoint.load(tmp_path / "last.pt"), Checkpoint.load(two_process_run[0] / "last.pt")
    assert saved_state(final).position.global_step == 4
    assert_close_states(reference.model, final.model, rtol=0, atol=0)
    assert all(map(torch.equal, flat_optimizer_state(saved_state(final).optimizer),
                   flat_optimizer_state(saved_state(reference).optimizer)))  # fmt: skip
    # every record as the unbroken run's, the epoch's train_loss over both ranks' 4 steps (the sums carried in last.pt)
    timed = ("time", "data_time", "compute_time", "samples_per_s")
    got, unbroken = ([{k: v for k, v in r.items() if k not in timed} for r in read_metrics(d)]
                     for d in (tmp_path, two_process_run[0]))  # fmt: skip
    assert got == unbroken and [r["kind"] for r in got].count("epoch") == 1


def test_a_second_launch_into_a_run_folder_is_refused_by_every_rank_and_attempt(synthetic_h5_64, two_process_run,
                                                                               tmp_path):  # fmt: skip
    """The same torchrun command again: every rank of every attempt (torchrun restarts the refused group) stops with
    the one refusal before writing anything; the earlier run's files stay byte-identical."""
    run = tmp_path / "run"
    shutil.copytree(two_process_run[0], run)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    assert ".launch.json" in before  # the first launch recorded its agent
    command = torchrun_command(["train_distributed.py", *tiny_run_args(synthetic_h5_64, run, *RUN)], 2, 1)
    r = subprocess.run(command, cwd=REPO_ROOT, env=subprocess_env(OMP_NUM_THREADS="1"), capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode != 0
    assert r.stderr.count("failed (exitcode: 2)") == 2, r.stderr[-3000:]  # torchrun's line: both attempts refused
    refusals = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    # each rank says it, one whole line each (torchrun may stop a rank that has not yet when the first exits)
    whole = refusals[0] if refusals else ""
    assert len(refusals) >= 2 and set(refusals) == {whole}, "\n".join(refusals)
    assert f"train.out_dir={run} already holds a run" in whole and "train.resume=auto" in whole
    assert f"train.out_dir={run}-2" in whole
    assert f'File "{REPO_ROOT}' not in r.stderr  # no traceback of ours (torchrun prints its own ChildFailedError)
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_a_rank_that_hangs_ends_the_run_by_name_and_the_group_resumes(synthetic_h5_64, two_process_run, tmp_path):
    """Rank 1 sleeps inside the forward pass of global step 2 (first attempt only): within dist.timeout_s both
    processes stop with a line naming rank 1 and the step, torchrun restarts the group, which resumes from the
    checkpoint of step 2 and ends with the weights of the uninterrupted run."""
    r = torchrun(with_faults("--hang-step", "2", "--hang-rank", "1"), synthetic_h5_64, tmp_path, *RUN,
                 "dist.timeout_s=5", max_restarts=1, label="2 processes, rank 1 hangs at step 2")  # fmt: skip
    printed = f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-5000:]}"  # a failure shows what the run said
    assert "rank 1 hangs at global step 2" in r.stdout, printed
    stalls = [line for line in r.stderr.splitlines() if line.startswith("error: rank ")]
    assert stalls, printed
    stuck = "stuck: rank 1 in the forward pass at epoch 0, step 2 (global step 2), busy in tests/harness/faulty"
    assert any(stuck in line for line in stalls), printed
    assert any(line.startswith("error: rank 0") and "waiting in a collective" in line for line in stalls), printed
    assert all("made no progress for 5 s (dist.timeout_s)" in line for line in stalls), printed
    assert "Traceback" not in r.stderr.split("stuck: rank 1")[0], printed
    assert "resumed from" in r.stdout and "step 2, global step 2" in r.stdout, printed
    ckpt = Checkpoint.load(tmp_path / "last.pt")
    assert saved_state(ckpt).position.global_step == 4 and saved_state(ckpt).ranks_in_sync is True
    reference = Checkpoint.load(two_process_run[0] / "last.pt")
    assert_close_states(reference.model, ckpt.model, rtol=0, atol=0)


class SplitByHand(nn.Module):
    """What nn.DataParallel does, on the CPU: scatter the batch in chunks, run a replica on each, concatenate."""

    def __init__(self, module: nn.Module, sizes: list[int]):
        super().__init__()
        self.module, self.sizes = module, sizes

    def forward(self, images, targets, masks, labelled=None):
        totals, parts = [], []
        labels = labelled.split(self.sizes) if labelled is not None else [None] * len(self.sizes)
        for label, chunk in zip(labels, zip(images.split(self.sizes), *(t.split(self.sizes) for t in targets),
                                            *(m.split(self.sizes) for m in masks))):  # fmt: skip
            n = len(targets)
            total, breakdown = self.module(chunk[0], list(chunk[1 : 1 + n]), list(chunk[1 + n :]), label)
            totals.append(total)
            parts.append(breakdown)
        return torch.cat(totals), {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


@pytest.mark.parametrize("sizes", [[2, 2], [3, 1]])
@pytest.mark.parametrize("one_source", [True, False], ids=["one source", "a sample of a source without faces"])
def test_balanced_data_parallel_gives_the_plain_loss_and_gradients(synthetic_h5_64, tmp_path, sizes, one_source):
    from torch.utils.data import DataLoader

    from simplepose.data.batching import collate, images_to_float
    from simplepose.data.dataset import SimplePoseDataset
    from simplepose.data.keypoint_mapping import KeypointMapping
    from simplepose.models import MultiTaskLoss, build_model

    cfg = tiny_cfg(synthetic_h5_64, tmp_path)
    dataset = SimplePoseDataset(synthetic_h5_64, cfg, train=True)
    batch = next(iter(DataLoader(dataset, batch_size=4, collate_fn=collate)))
    images, targets, masks = images_to_float(batch["image"]), batch["targets"], batch["masks"]
    torch.manual_seed(0)
    model, loss = build_model(cfg).eval(), MultiTaskLoss(cfg, COCO)  # eval: replicas would normalise per slice

    def loss_and_grads(compute):
        model.zero_grad()
        total, breakdown = compute()
        total.backward()
        return total.detach(), breakdown, [p.grad.clone() for p in model.parameters()]

    labelled = None
    if not one_source:  # the last sample's source lacks the face keypoints (data.keypoint_mapping)
        labelled = torch.ones(4, COCO.num_channels)
        faceless = COCO.dataset_keypoints[5:]
        labelled[3] = torch.from_numpy(KeypointMapping.by_name(faceless, COCO, "faceless.h5").labelled)
    plain = loss_and_grads(lambda: loss(model(images), targets, masks, labelled))
    launcher = DataParallelBalanced(torch.device("cpu"))
    replicas = SplitByHand(ModelWithLoss(model, loss), sizes)
    balanced = loss_and_grads(lambda: launcher.forward_loss(replicas, loss, images, targets, masks, labelled))

    assert plain[0].item() > 0
    assert abs(balanced[0].item() - plain[0].item()) <= 1e-6 * plain[0].item()
    for k, v in plain[1].items():
        assert torch.allclose(balanced[1][k], v, rtol=1e-6, atol=1e-6 * plain[0].item()), k
    for g_plain, g_balanced in zip(plain[2], balanced[2]):
        assert (g_balanced - g_plain).norm() <= 1e-6 * g_plain.norm() + 1e-12


def test_sync_batchnorm_conversion_replaces_every_batchnorm(synthetic_h5_64, tmp_path):
    from simplepose.models import build_model

    model = build_model(tiny_cfg(synthetic_h5_64, tmp_path))
    plain = [n for n, m in model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    keys = list(model.state_dict())
    converted = sync_batchnorm(model)
    assert plain, "the tiny model has BatchNorm layers"
    sync = [n for n, m in converted.named_modules() if isinstance(m, nn.SyncBatchNorm)]
    others = [n for n, m in converted.named_modules()
              if isinstance(m, nn.modules.batchnorm._BatchNorm) and not isinstance(m, nn.SyncBatchNorm)]  # fmt: skip
    assert sync == plain and others == []
    assert list(converted.state_dict()) == keys  # checkpoints load either way


def test_restart_drops_metrics_past_the_checkpoint_and_a_cut_line(tmp_path):
    from simplepose.engine.logger import MetricsLogger, read_metrics

    logger = MetricsLogger(tmp_path, tensorboard=False)
    for step in (1, 2, 3):
        logger.log("train", 0, step, loss=1.0)
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"kind": "train", "epoch": 0, "glo')  # the dying process was killed mid-line
    MetricsLogger(tmp_path, tensorboard=False).truncate_after(2)
    assert [r["global_step"] for r in read_metrics(tmp_path)] == [1, 2]
