"""Training failures as messages a user can act on, instead of a traceback: DataLoader failures and running out
of device memory.

- a sample that raised inside a worker: its own message (the dataset names the sample and the file);
- a worker that died (killed by a signal, e.g. the out-of-memory killer) or broke its connection: the epoch, the
  step and the samples then loading, and what to lower;
- no batch within ``data.loader_timeout`` (a worker stuck without dying): where, and how to find out why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tqdm import tqdm

from config.schema import DataConfig
from utils.errors import UserError


def worker_error_message(message: str) -> str:
    """The original exception's own message from the text of a DataLoader worker failure ("Caught X in
    DataLoader worker process N. Original Traceback ..."), without the worker's traceback."""
    lines = message.rstrip().splitlines()
    last_frame = max((i for i, line in enumerate(lines) if line.startswith("  ")), default=0)
    detail = "\n".join(lines[last_frame + 1 :]).strip() or lines[0]
    kind, sep, text = detail.partition(": ")
    if sep and kind.rsplit(".", 1)[-1] == "UserError":
        return text
    worker = lines[0].removeprefix("Caught ").rstrip(".")
    return f"{detail} (raised in a DataLoader worker: {worker}); rerun with data.num_workers=0 for the full traceback"


def _stuck_message(path: str, where: str, timeout: float) -> str:
    return (
        f"no batch came from a DataLoader worker within data.loader_timeout={timeout:g} s while loading {path} "
        f"({where}): a worker is stuck without dying (a deadlock, or a read hanging on a network file system). "
        f"Check that {path} reads at normal speed from this machine (or copy it to a local disk); if batches are "
        f"only slow, raise data.loader_timeout (0 waits for ever); data.num_workers=0 loads in this process, "
        f"where a stack dump (e.g. `py-spy dump --pid PID`) shows where it hangs. Then continue with "
        f"train.resume=auto"
    )


def _died_message(path: str, where: str, message: str) -> str:
    return (
        f"a DataLoader worker died while loading {path} ({where}): {message.strip().rstrip('.')}. This is most "
        f"often the out-of-memory killer (see `dmesg`): lower data.num_workers or train.batch_size "
        f"(data.num_workers=0 loads in this process and reports any sample error directly), then continue with "
        f"train.resume=auto"
    )


@contextmanager
def loader_errors(path: str, cfg: DataConfig, where: Callable[[], str]) -> Iterator[None]:
    """Turn a DataLoader failure raised inside the block into a UserError. ``path`` names the data file;
    ``where()`` describes the position (e.g. ``epoch 2, step 14 (next batch: samples [...])``); it is only
    called when an error is reported."""
    try:
        yield
    except BaseException as e:
        for bar in list(getattr(tqdm, "_instances", ())):
            bar.close()  # the message then starts on a line of its own, not after a progress bar
        if not isinstance(e, Exception):
            raise
        message = str(e)
        if isinstance(e, RuntimeError) and message.startswith("DataLoader timed out after"):
            raise UserError(_stuck_message(path, where(), cfg.loader_timeout)) from None
        died = isinstance(e, RuntimeError) and "DataLoader worker (pid" in message
        # a worker killed while handing over a batch breaks the connection the batch's memory comes through
        if isinstance(e, (ConnectionError, EOFError)) and cfg.num_workers > 0:
            message = f"the connection to a DataLoader worker broke ({type(e).__name__}: {e})"
        elif not (message.startswith("Caught ") and " in DataLoader worker process " in message) and not died:
            raise
        if message.startswith("Caught "):
            raise UserError(worker_error_message(message)) from None
        raise UserError(_died_message(path, where(), message)) from None


def next_batch(trainer, epoch: int) -> str:
    """``epoch E, step S (next batch: samples [..], image ids [..])``: where a trainer's DataLoader failed."""
    step = min(max(trainer.global_step - epoch * trainer.steps_per_epoch, 0), trainer.steps_per_epoch)
    samples = trainer.sampler.batch_at(epoch, step)
    ds = trainer.train_set
    ids = f", image ids {[int(ds.image_id[ds.sample_image[i]]) for i in samples]}" if hasattr(ds, "image_id") else ""
    return f"epoch {epoch}, step {step} (next batch: samples {samples}{ids})"


def out_of_memory_message(trainer, where: str, shape: tuple[int, ...]) -> str:
    """One line for a CUDA out-of-memory error in a training step at ``where`` on micro-batches of ``shape``."""
    t = trainer.cfg.train
    b, a = t.batch_size, t.accumulate_steps
    options = []
    if b > 1:
        options.append(f"train.batch_size={b // 2} train.accumulate_steps={a * 2} (the same {b * a} samples per step)")
    if not trainer.cfg.model.checkpoint_activations:
        options.append("model.checkpoint_activations=true (about 3x less activation memory, ~30% slower steps)")
    if trainer.precision.dtype is None:
        options.append("train.amp=auto or bf16/fp16 (half the activation memory)")
    advice = ", or ".join(options) or "a smaller data.input_size or model (the other savings are in use)"
    return (
        f"out of memory on {trainer.device} at {where}: a micro-batch of {shape[0]} images of {shape[-2]}x{shape[-1]} "
        f"px per process ({trainer.precision.name}). Use less memory per micro-batch: {advice}; then continue with "
        f"train.resume=auto train.out_dir={trainer.out_dir} (the last checkpoint is intact)"
    )
