"""Training failures as messages a user can act on, instead of a traceback: DataLoader failures and running out
of device memory.

- a sample that raised inside a worker: its own message (the dataset names the sample and the file);
- a worker that died (killed by a signal, e.g. the out-of-memory killer) or broke its connection: the epoch, the
  step and the samples then loading, and what to lower;
- no batch within ``data.loader_timeout`` (a worker stuck without dying): where, and how to find out why.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

import torch

from simplepose.config.schema import Config, DataConfig
from simplepose.utils.errors import DataFileError, UserError
from simplepose.utils.precision import Precision
from simplepose.utils.progress_bar import close_bars


def worker_error_message(message: str) -> str:
    """The original exception's own message from the text of a DataLoader worker failure ("Caught X in
    DataLoader worker process N. Original Traceback ..."), without the worker's traceback."""
    lines = message.rstrip().splitlines()
    last_frame = max((i for i, line in enumerate(lines) if line.startswith("  ")), default=0)
    detail = "\n".join(lines[last_frame + 1 :]).strip() or lines[0]
    kind, sep, text = detail.partition(": ")
    if sep and kind.rsplit(".", 1)[-1] in _user_error_names():
        return text
    worker = lines[0].removeprefix("Caught ").rstrip(".")
    return f"{detail} (raised in a DataLoader worker: {worker}); rerun with data.num_workers=0 for the full traceback"


class LoaderError(DataFileError):
    """A DataLoader failure while loading ``file``: a worker stuck (``key`` ``data.loader_timeout``), a worker that died
    (``data.num_workers``), or a sample that raised in a worker (``key`` None; its own message, which names the
    sample: only the text of an error crosses from a worker). ``where``: the position and the batch then loading."""

    def __init__(self, message: str, file: str, key: str | None, where: str) -> None:
        super().__init__(message, file=file, key=key)
        self.where = where


def _user_error_names(cls: type[BaseException] = UserError) -> set[str]:
    """The class names of UserError and its subclasses (an error raised in a worker reaches us as text)."""
    return {cls.__name__}.union(*(_user_error_names(c) for c in cls.__subclasses__()))


# the messages of a stuck and of a dead worker: the data file, where (the position and the batch then loading)
STUCK_WORKER = (
    "no batch came from a DataLoader worker within data.loader_timeout={timeout:g} s while loading {path} "
    "({where}): a worker is stuck without dying (a deadlock, or a read hanging on a network file system). "
    "Check that {path} reads at normal speed from this machine (or copy it to a local disk); if batches are "
    "only slow, raise data.loader_timeout (0 waits for ever); data.num_workers=0 loads in this process, "
    "where a stack dump (e.g. `py-spy dump --pid PID`) shows where it hangs. Then continue with train.resume=auto"
)
DEAD_WORKER = (
    "a DataLoader worker died while loading {path} ({where}): {message}. This is most often the out-of-memory "
    "killer (see `dmesg`): lower data.num_workers or train.batch_size (data.num_workers=0 loads in this process "
    "and reports any sample error directly), then continue with train.resume=auto"
)


@contextmanager
def loader_errors(path: str, cfg: DataConfig, where: Callable[[], str]) -> Iterator[None]:
    """Turn a DataLoader failure raised inside the block into a ``LoaderError``. ``path`` names the data file;
    ``where()`` describes the position (e.g. ``epoch 2, step 14 (next batch: samples [...])``); it is only
    called when an error is reported. A worker's death reported while an error is being turned into its message
    does not replace it (``raise_translated``; ``dead_workers_named`` is the run's backstop)."""
    try:
        yield
    except GeneratorExit:  # the block was left without its exit (a generator closed at collection): nothing to say
        raise
    except BaseException as e:
        raise_translated(e, path, cfg, where)


@contextmanager
def dead_workers_named(path: str, cfg: DataConfig, where: Callable[[], str]) -> Iterator[None]:
    """The backstop of a whole run around ``loader_errors``: a DataLoader worker's death reported anywhere in the
    block (torch's SIGCHLD handler raises ``RuntimeError: DataLoader worker (pid N) is killed by signal`` between
    any two bytecodes of the main process: also while another error is being reported, after the loop, or during
    the clean-up) becomes the ``LoaderError`` of a dead worker, or, when it interrupted the report of another error
    (a user error, a DataLoader failure), that error's; everything else passes as it is."""
    try:
        yield
    except RuntimeError as e:
        if not worker_died(e):
            raise
        raise_translated(_interrupted_failure(e), path, cfg, where)


def worker_died(e: BaseException) -> bool:
    """Whether ``e`` is torch's report of a DataLoader worker that died (killed by a signal, or exited)."""
    return isinstance(e, RuntimeError) and "DataLoader worker (pid" in str(e)


def _loader_failure(e: BaseException, cfg: DataConfig) -> bool:
    """Whether ``e`` is a DataLoader's failure: a worker stuck, dead, its connection broken, or a sample's error."""
    message = str(e)
    return (
        (isinstance(e, RuntimeError) and message.startswith("DataLoader timed out after"))
        or worker_died(e)
        or (isinstance(e, (ConnectionError, EOFError)) and cfg.num_workers > 0)
        or (message.startswith("Caught ") and " in DataLoader worker process " in message)
    )


def _interrupted_failure(e: BaseException) -> BaseException:
    """The first error whose report ``e`` (a worker's death) interrupted: the earliest user error or DataLoader
    failure among its contexts, else ``e``."""
    found, seen, context = e, {id(e)}, e.__context__
    while context is not None and id(context) not in seen:
        seen.add(id(context))
        if isinstance(context, UserError) or _loader_failure(context, DataConfig(num_workers=1)):
            found = context
        context = context.__context__
    return found


_RETRIES = 8  # the workers whose deaths may each be reported (one signal each) while an error is being translated


def raise_translated(e: BaseException, path: str, cfg: DataConfig, where: Callable[[], str]) -> NoReturn:
    """Raise what ``e`` (an error out of a DataLoader's block) means for the user: a ``LoaderError`` (see
    ``loader_errors``), or ``e`` itself when it is no DataLoader failure. A worker's death reported while this
    runs (torch's SIGCHLD handler raises between any two bytecodes) does not replace ``e``: its translation is
    made again."""
    for _ in range(_RETRIES):
        try:
            translated = _translation(e, path, cfg, where)
        except RuntimeError as again:
            if not worker_died(again):
                raise
            continue
        if translated is e:
            raise e
        raise translated from None
    raise e


def stop_reporting_worker_deaths() -> None:
    """The run stops on a worker's death: a death torch's SIGCHLD handler has still to report (the signal may come
    later, up to the interpreter's exit, while the dead iterator still lists its workers) would print a traceback
    after the run's one line. SIGCHLD gets its default disposition for the rest of the process (a worker's death is
    then found by the DataLoader's own status checks, should another loader run here)."""
    if hasattr(signal, "SIGCHLD") and threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def _translation(e: BaseException, path: str, cfg: DataConfig, where: Callable[[], str]) -> BaseException:
    """The ``LoaderError`` that ``e`` means, or ``e`` itself when it is no DataLoader failure."""
    close_bars()  # the message then starts on a line of its own, not after a progress bar
    if not isinstance(e, Exception) or not _loader_failure(e, cfg):  # a worker's error may come as its own type
        return e
    message = str(e)
    if message.startswith("DataLoader timed out after"):
        here = where()
        text = STUCK_WORKER.format(timeout=cfg.loader_timeout, path=path, where=here)
        return LoaderError(text, path, "data.loader_timeout", here)
    if message.startswith("Caught "):
        return LoaderError(worker_error_message(message), path, None, "")
    if isinstance(e, (ConnectionError, EOFError)):
        # a worker killed while handing over a batch breaks the connection the batch's memory comes through
        message = f"the connection to a DataLoader worker broke ({type(e).__name__}: {e})"
    stop_reporting_worker_deaths()
    here = where()
    text = DEAD_WORKER.format(path=path, where=here, message=message.strip().rstrip("."))
    return LoaderError(text, path, "data.num_workers", here)


class OutOfMemory(UserError):
    """A CUDA out-of-memory error in a training step: on ``device``, at ``where`` (the position), on micro-batches of
    ``shape``; ``savings``: the overrides not yet in use that lower the memory of a micro-batch."""

    def __init__(
        self, message: str, device: torch.device, where: str, shape: tuple[int, ...], savings: list[str]
    ) -> None:
        super().__init__(message)
        self.device, self.where, self.shape, self.savings = device, where, shape, savings


def out_of_memory(
    cfg: Config, precision: Precision, device: torch.device, where: str, shape: tuple[int, ...]
) -> OutOfMemory:
    """The error for running out of device memory in a training step at ``where`` on micro-batches of ``shape``: one
    line with the savings of ``cfg`` not yet in use, and how to continue."""
    t = cfg.train
    b, a = t.batch_size, t.accumulate_steps
    savings, why = [], []
    if b > 1:
        savings.append(f"train.batch_size={b // 2} train.accumulate_steps={a * 2}")
        why.append(f"the same {b * a} samples per step")
    if not cfg.model.checkpoint_activations:
        savings.append("model.checkpoint_activations=true")
        why.append("about 3x less activation memory, ~30% slower steps")
    if precision.dtype is None:
        savings.append("train.amp=auto")
        why.append("or bf16/fp16: half the activation memory")
    advice = ", or ".join(f"{s} ({w})" for s, w in zip(savings, why)) or (
        "a smaller data.input_size or model (the other savings are in use)"
    )
    message = (
        f"out of memory on {device} at {where}: a micro-batch of {shape[0]} images of {shape[-2]}x{shape[-1]} "
        f"px per process ({precision.name}). Use less memory per micro-batch: {advice}; then continue with "
        f"train.resume=auto train.out_dir={t.out_dir} (the last checkpoint is intact)"
    )
    return OutOfMemory(message, device, where, tuple(shape), savings)
