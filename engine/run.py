"""What the three entry points share: parse the command line, resolve the config, pick a launcher, train.

train.py              -> run("single")
train_parallel.py     -> run("data_parallel")
train_distributed.py  -> run("distributed")   (under torchrun)

The config is resolved once, completely (the command line, then what the launch adds: an elastic restart's
``train.resume=auto``, the quick start's synthetic data), before the launcher is built from it; the trainer receives
that same config.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable
from itertools import dropwhile
from pathlib import Path

import torch

from simplepose.checkpoint.format import Checkpoint
from simplepose.config.config_file import add_config_arguments, load_config, preset_file, with_overrides
from simplepose.config.schema import Config
from simplepose.data.quickstart_data import prepare_synthetic_data
from simplepose.engine.batch_errors import dead_workers_named
from simplepose.engine.checkpointer import TrainState, check_same_model, resolve_resume
from simplepose.engine.curves import plot_run
from simplepose.engine.hook_base import Hook
from simplepose.engine.launch import DataParallelBalanced, Distributed, Launcher, SingleDevice
from simplepose.engine.run_folder import continues_folder, launch_owns, undone_if_start_fails
from simplepose.engine.run_life import (
    TrainingStopped,
    held_folder,
    one_process_launch,
    stop_before_training,
    stop_line,
    stopped,
)
from simplepose.engine.trainer import Trainer, training_data
from simplepose.engine.validation import validation_sets
from simplepose.evaluate.prediction_sheet import draw_predictions
from simplepose.utils import distributed as du
from simplepose.utils.commands import command, commands_here
from simplepose.utils.errors import UserError
from simplepose.utils.io import OUT_OF_SPACE_OR_READ_ONLY, disk_errors, write_error_message
from simplepose.utils.peers import peer_loss_named
from simplepose.utils.stop_signals import stop_requests
from simplepose.utils.text import counted

log = logging.getLogger(__name__)

QUICKSTART_PRESET = Path(__file__).resolve().parents[1] / "config" / "quickstart.yaml"
# the launcher (a module of the package) of each kind of launch, for its usage line and the hints' command lines
LAUNCHERS = {"single": "train", "data_parallel": "train_parallel", "distributed": "train_distributed"}


def program(kind: str) -> str:
    """The command that starts ``kind``'s launcher where the user is (``utils.commands``; under torchrun with this
    launch's number of processes)."""
    torchrun = f"--nproc_per_node={du.env_local_world_size()}" if kind == "distributed" else ""
    return command(LAUNCHERS[kind], torchrun=torchrun)


def build_parser(description: str, kind: str = "single") -> argparse.ArgumentParser:
    """The parser of ``kind``'s launcher: ``description`` (its docstring, in the console command's spelling) and the
    usage line spelled where the user is; each launcher's ``build_parser``."""
    parser = argparse.ArgumentParser(
        prog=command(LAUNCHERS[kind], torchrun="--nproc_per_node=N" if kind == "distributed" else ""),
        description=commands_here(description),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_arguments(parser)
    return parser


def parse_args(description: str, argv: list[str] | None, kind: str = "single") -> argparse.Namespace:
    """The launcher's arguments, parsed by ``build_parser(description, kind)``."""
    return build_parser(description, kind).parse_args(argv)


def start_processes(kind: str, cfg: Config) -> int:
    """Join the process group of a torchrun launch (``dist.*``, ``train.device``); returns this process's rank."""
    if kind != "distributed":
        return 0
    if not du.under_torchrun():
        use = command("train_distributed", "...", torchrun="--nproc_per_node=N")
        log.info("note: not started by torchrun; training in one process (use: %s)", use)
    # collectives may wait a minute longer than the stall watchdog, which then reports first and by name
    du.init_distributed(du.select_device(cfg.train.device), cfg.dist.backend, timeout_s=cfg.dist.timeout_s + 60)
    return du.get_rank()


def make_launcher(kind: str, cfg: Config) -> Launcher:
    """The launcher of ``kind`` for the resolved ``cfg`` (after ``start_processes``)."""
    if kind == "single":
        return SingleDevice(du.select_device(cfg.train.device))
    if kind == "data_parallel":
        device = du.select_device(cfg.train.device)
        if device.type != "cuda":
            log.info(
                "note: no GPU visible; DataParallel falls back to one process on the CPU (as %s)", command("train")
            )
        elif torch.cuda.device_count() > 1:
            device = torch.device("cuda", (cfg.dist.dp_device_ids or [0])[0])
        return DataParallelBalanced(device, device_ids=cfg.dist.dp_device_ids or None)
    if kind == "distributed":
        d = cfg.dist
        return Distributed(
            du.select_device(cfg.train.device),
            du.get_rank(),
            du.get_world_size(),
            sync_bn=d.sync_bn,
            find_unused_parameters=d.find_unused_parameters,
            static_graph=cfg.train.accumulate_steps == 1 and not d.find_unused_parameters,
        )
    raise ValueError(kind)


def restart_overrides(cfg: Config) -> dict[str, str]:
    """A torchrun restart of the launch that claimed ``train.out_dir`` is the same run: it continues from the run's
    last checkpoint (or starts it again when the first attempt died before writing one); a train.resume=PATH given
    at launch only applies until the run has written its own. A restart of a launch whose first attempt was refused
    the folder (another run's) adds nothing, and is refused again (engine/run_folder.py). A collective."""
    if launch_owns(cfg.train.out_dir) and (not cfg.train.resume or (Path(cfg.train.out_dir) / "last.pt").is_file()):
        return {"train.resume": "auto"}
    return {}


def quickstart_overrides(cfg: Config, rank: int) -> dict[str, str]:
    """The data.* settings of the quick start's synthetic dataset, made once (by rank 0; the others wait, then
    only read its paths)."""
    if rank == 0:
        made = prepare_synthetic_data(cfg.data)
    du.barrier()
    return made if rank == 0 else prepare_synthetic_data(cfg.data)


def restarted_config(cfg: Config) -> Config:
    """``cfg`` with ``train.resume=auto`` after an elastic restart."""
    derived = restart_overrides(cfg)
    return with_overrides(cfg, derived, "set by the launcher") if derived else cfg


def with_quickstart_data(cfg: Config, quickstart: bool, rank: int) -> Config:
    """``cfg`` with the quick start's synthetic data (made once) where it trains on no data of the user's."""
    if not quickstart or cfg.data.train or cfg.data.train_sources:
        return cfg
    made = quickstart_overrides(cfg, rank)
    # a data.* path the user gave is kept (and checked before the first step), never replaced in silence
    derived = {key: value for key, value in made.items() if not getattr(cfg.data, key.split(".", 1)[1])}
    return with_overrides(cfg, derived, "set by the launcher") if derived else cfg


def run(
    kind: str,
    description: str,
    argv: list[str] | None = None,
    extra_hooks: Callable[[Trainer], list[Hook]] | None = None,
) -> int:
    """Parse the command line, resolve the config, pick the launcher, train, report. ``extra_hooks(trainer)``: hooks
    to add to the trainer's (tests/harness injects faults with one)."""
    args = parse_args(description, argv, kind)
    one_process_launch(kind, LAUNCHERS[kind], sys.argv[1:] if argv is None else argv)
    cfg = load_config(args.config or QUICKSTART_PRESET, args.overrides)
    quickstart = args.config is None or preset_file(args.config).resolve() == QUICKSTART_PRESET
    built: list[Trainer] = []

    def position() -> str:
        return built[0].position.where() if built else "while the run was starting"

    def hint() -> str:
        return continuation(built[0] if built else None, kind, argv)

    # a DataLoader worker's death reported anywhere (torch raises it from a signal handler, at any point: also while
    # another error is reported or the processes are shut down) ends in its one line, never a traceback; a peer lost
    # (killed, its node gone) ends this rank with one line too: which rank, where, how to continue

    with dead_workers_named(training_data(cfg), cfg.data, position), peer_loss_named(position, hint):
        rank = start_processes(kind, cfg)
        try:
            cfg = restarted_config(cfg)
            resume_hint = f"then continue the run with train.resume=auto train.out_dir={cfg.train.out_dir}"
            previous_hook, threading.excepthook = threading.excepthook, _quiet_disk_errors_in_threads
            try:
                start = time.perf_counter()
                # a full disk or read-only folder while writing logs, config or plots; a start that fails leaves
                # no run behind; the folder held (engine/run_life.py) before anything is read or written there;
                # SIGTERM and Ctrl-C from here on: every rank stops at one step boundary, last.pt written there
                # a peer lost while training: named before the stop handlers go and the group is left (torchrun's
                # SIGTERM to the ranks left would end them first); the start's collectives: around the whole run
                with (
                    peer_loss_named(position, hint),
                    disk_errors(resume_hint),
                    undone_if_start_fails(cfg.train.out_dir, rank),
                    held_folder(cfg.train, rank),
                ):
                    finished: tuple[str, int, int] | None = du.broadcast_object(
                        finished_run(cfg) if rank == 0 else None
                    )
                    if finished is not None:
                        if rank == 0:
                            print(finished_message(cfg, *finished, command_line(kind, argv)))
                        return 0
                    cfg = with_quickstart_data(cfg, quickstart, rank)  # after: a finished run needs none made
                    launcher = make_launcher(kind, cfg)
                    with stop_requests(rank == 0):
                        trained = train_until_stopped(kind, cfg, launcher, argv, extra_hooks, built.append)
                    if launcher.rank == 0:
                        report(cfg, trained, time.perf_counter() - start, quickstart)
                    # every rank has finished before any leaves the group: torch 2.2's gloo could hang for ever in
                    # destroy_process_group on the rank that left last (pytorch/pytorch#75097)
                    du.barrier()
            finally:
                threading.excepthook = previous_hook
        finally:
            du.cleanup()
    return 0


def train_until_stopped(
    kind: str,
    cfg: Config,
    launcher: Launcher,
    argv: list[str] | None,
    extra_hooks: Callable[[Trainer], list[Hook]] | None,
    keep: Callable[[Trainer], None],
) -> dict[str, float]:
    """Start or resume the run, train it to its end and return its last summary; a stop signal ends it with its
    line (``Stopped``), a second Ctrl-C with ``KeyboardInterrupt`` saying where. ``keep``: given the trainer once
    built (for messages of the run's position)."""
    trainer = Trainer(cfg, launcher)
    keep(trainer)
    if extra_hooks is not None:
        trainer.register_hooks(extra_hooks(trainer))
    try:
        try:
            stop_before_training()
            return trainer.fit()
        except TrainingStopped as e:
            line = None
            if trainer.is_main:
                again = resume_command(command_line(kind, argv))
                saved = trainer.checkpointer.last_saved_step
                line = stop_line(e.signum, trainer.position, trainer.out_dir / "last.pt", saved, again)
            raise stopped(line, e) from None
    except KeyboardInterrupt:
        if launcher.rank != 0:
            raise
        raise KeyboardInterrupt(interrupted_message(trainer, command_line(kind, argv))) from None


def command_line(kind: str, argv: list[str] | None) -> list[str]:
    """The command that started this run (``kind``'s program and its arguments), as words."""
    return [*program(kind).split(), *(sys.argv[1:] if argv is None else argv)]


def with_settings(command: list[str], settings: dict[str, str]) -> str:
    """``command`` with the ``key=value`` overrides ``settings`` in place of any it gives for those keys, quoted for a
    shell."""
    kept = [a for a in command if a.split("=", 1)[0] not in settings]
    return shlex.join([*kept, *(f"{k}={v}" for k, v in settings.items())])


def finished_run(cfg: Config) -> tuple[str, int, int] | None:
    """(the checkpoint, its epochs, its global step) when ``train.resume`` continues the run of ``train.out_dir``
    (``auto``, or a checkpoint inside it) and that run has trained its ``train.epochs`` already: nothing is left to
    train. Else None, also for a checkpoint that cannot be read or does not fit this config (the trainer says what
    is wrong with it)."""
    if not continues_folder(cfg.train):
        return None
    try:
        path = resolve_resume(cfg.train.resume, cfg.train.out_dir)
        if path is None or not path.is_file():
            return None
        ckpt = Checkpoint.load(path)
        check_same_model(ckpt, cfg)
        state = TrainState.of(ckpt)
    except UserError:
        return None
    if state is None:
        return None
    p = state.position
    done = p.epoch >= cfg.train.epochs and not p.step and not p.validation_due
    return (str(path), p.epoch, p.global_step) if done else None


def finished_message(cfg: Config, path: str, epochs: int, global_step: int, command: list[str]) -> str:
    """What a resume of a finished run says instead of training: what the checkpoint holds, that nothing changed,
    and the command that trains further (the same, with a higher ``train.epochs``)."""
    more = with_settings(command, {"train.epochs": str(epochs + 1)})
    floor = "; its cosine schedule has ended and trains on at its floor" if cfg.train.lr_schedule == "cosine" else ""
    return (
        f"{path} holds a finished run: {counted(epochs, 'epoch')} done of train.epochs={cfg.train.epochs} (global step "
        f"{global_step}); nothing was trained and no file was changed. To train further, raise train.epochs (above "
        f"{epochs}{floor}), e.g.: {more}"
    )


def interrupted_message(trainer: Trainer, command: list[str]) -> str:
    """Where Ctrl-C stopped ``trainer`` and how to continue: the command with ``train.resume=auto``, and the steps
    since the last checkpoint that the continued run will redo."""
    p, saved = trainer.position, trainer.checkpointer.last_saved_step
    again = with_settings(command, {"train.resume": "auto"})
    if saved is None:
        return (
            f"stopped at {p.where()}, before the run's first checkpoint; {again} starts it again from the beginning "
            f"({counted(p.global_step, 'step')} redone)"
        )
    return (
        f"stopped at {p.where()}; continue the run with: {again} (it resumes from {trainer.out_dir / 'last.pt'} at "
        f"global step {saved}: {counted(p.global_step - saved, 'step')} since that checkpoint will be redone)"
    )


def continuation(trainer: Trainer | None, kind: str, argv: list[str] | None) -> str:
    """How a run that ended on a lost peer or a stall goes on: the checkpoint it resumes from and the command with
    ``train.resume=auto`` (``resume_command``)."""
    again = resume_command(command_line(kind, argv))
    again = (" " if du.env_node_count() > 1 else ": ") + again
    saved = trainer.checkpointer.last_saved_step if trainer is not None else None
    if trainer is None or saved is None:
        return f"no checkpoint of this run yet: start it again with{again}"
    return f"{trainer.out_dir / 'last.pt'} holds global step {saved}: continue the run with{again}"


def resume_command(command: list[str]) -> str:
    """``command`` with ``train.resume=auto``; on a job of several nodes, the program and its arguments for the job's
    torchrun command on each node (the rendezvous options are the agents', unknown to this process)."""
    if du.env_node_count() > 1:
        launched = list(dropwhile(lambda word: word == "torchrun" or word.startswith("--"), command))
        return (
            f"the job's torchrun command on each of its {du.env_node_count()} nodes, running: "
            f"{with_settings(launched, {'train.resume': 'auto'})}"
        )
    return with_settings(command, {"train.resume": "auto"})


def _quiet_disk_errors_in_threads(args: threading.ExceptHookArgs) -> None:
    """A background writer (TensorBoard's event thread) that meets a full disk or a read-only folder prints one
    line instead of a traceback; the run itself then stops with a clear message at its next write."""
    e = args.exc_value
    if isinstance(e, OSError) and e.errno in OUT_OF_SPACE_OR_READ_ONLY:
        where = os.fsdecode(e.filename) if e.filename else "a file"
        log.warning("background writer stopped: %s", write_error_message(where, e))
        return
    threading.__excepthook__(args)


def validation_lines(cfg: Config, result: dict) -> list[str]:
    """The last validation's COCO figures in the closing summary, only those measured: the AP of data.val_images
    (with its AP50 and AR), or else the mean of the sources' APs, named as such; then each source's own."""
    sets = validation_sets(cfg.data)
    sources = [name for name, _, _ in sets if name and f"{name}/AP" in result]
    lines = []
    if "AP" in result and any(not name for name, _, _ in sets):
        lines.append(f"validation {figures(result)}" + (" on data.val_images" if sources else ""))
    elif "AP" in result and sources:
        lines.append(f"validation AP {result['AP']:.3f}: the mean of the {len(sources)} sources' AP")
    lines += [f"  source {name}: {figures(result, name + '/')}" for name in sources]
    return lines


def figures(result: dict, prefix: str = "") -> str:
    """``AP 0.212 (AP50 0.540, AR 0.300)`` of the figures named ``prefix + 'AP'``, ...: those measured only."""
    more = [f"{k} {result[prefix + k]:.3f}" for k in ("AP50", "AR") if prefix + k in result]
    return f"AP {result[prefix + 'AP']:.3f}" + (f" ({', '.join(more)})" if more else "")


def report(cfg: Config, result: dict, seconds: float, quickstart: bool) -> None:
    out = Path(cfg.train.out_dir)
    curves = plot_run(out)
    lines = [f"done in {seconds / 60:.1f} min", *validation_lines(cfg, result)]
    lines += [
        f"checkpoints: {out / 'last.pt'}" + (f", {out / 'best.pt'}" if (out / "best.pt").is_file() else ""),
        f"metrics:     {out / 'metrics.jsonl'}",
        f"curves:      {curves}",
        f"config:      {out / 'config.yaml'}",
    ]
    if quickstart and cfg.data.val_images:
        lines.append(f"predictions: {draw_predictions(cfg, out)}")
    print("\n".join(lines), file=sys.stdout)
