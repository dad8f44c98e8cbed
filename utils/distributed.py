"""Process-group setup from torchrun's environment, rank helpers and all-gather.

Works unchanged with one process (no torchrun): every helper then acts as the identity.
Multi-node runs use torchrun's standard variables (``--nnodes``, ``--node_rank``, ``--rdzv_*``), which
set RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for us.
"""

from __future__ import annotations

import datetime
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from simplepose.utils.torch_compat import process_group_kwargs


def env_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def env_local_world_size() -> int:
    """The number of processes torchrun started on this machine (its --nproc_per_node; 1 without torchrun)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))


def env_node_count() -> int:
    """The number of machines (torchrun agents) of this job, from torchrun's environment (1 without torchrun)."""
    return int(os.environ.get("GROUP_WORLD_SIZE", "1"))


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def launch_rank() -> int:
    """This process's rank: the process group's, else (before it is set up) torchrun's RANK, else 0."""
    return get_rank() if is_distributed() else int(os.environ.get("RANK", "0"))


def get_world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def get_local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def is_main_process() -> bool:
    return get_rank() == 0


def select_device(name: str = "auto", cpu_hint: str = "train.device=cpu") -> torch.device:
    """``auto``: this process's GPU (by LOCAL_RANK) when CUDA is present, else the CPU; ``cpu``, ``cuda``,
    ``cuda:N``. A name that is not a device, or CUDA asked for where there is none (or too few GPUs), is a UserError
    whose hint is ``cpu_hint``: how the caller's user asks for the CPU (training ``train.device=cpu``, a command's
    ``--device cpu``, the Python API's ``device="cpu"``)."""
    from simplepose.utils.errors import UserError

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise UserError(
            f"device {name!r} is not a device: give auto, cpu, cuda or cuda:N (e.g. {cpu_hint})", key="device"
        ) from None
    if device.type not in ("cpu", "cuda"):
        raise UserError(
            f"device {name!r}: this project runs on cpu or cuda (auto, cpu, cuda, cuda:N); use {cpu_hint}", key="device"
        )
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"device '{name}' requested but CUDA is not available; use {cpu_hint}", key="device")
        count = torch.cuda.device_count()
        if device.index is None:
            device = torch.device("cuda", get_local_rank() % count)
        elif device.index >= count:
            raise UserError(
                f"device '{name}' requested but this machine has {count} GPU(s) (cuda:0 to "
                f"cuda:{count - 1}); give one of those, or {cpu_hint}",
                key="device",
            )
        torch.cuda.set_device(device)
    return device


_STORE: dist.Store | None = None  # this attempt's rendezvous store (heartbeats of utils.watchdog)
_FLAGS_GROUP: Any = None  # a gloo group of every rank, for AgreedFlags' CPU all-reduces (also beside NCCL)
_GROUP_BROKEN = False  # a peer is gone (forget_group)


def under_torchrun() -> bool:
    """True in a process started by torchrun (also with --nproc_per_node=1)."""
    return "TORCHELASTIC_RUN_ID" in os.environ or ("RANK" in os.environ and "WORLD_SIZE" in os.environ)


def init_distributed(device: torch.device, backend: str = "auto", timeout_s: float = 1800.0) -> bool:
    """Join the process group described by torchrun's environment (with one process too, so that one GPU runs
    the same code as many). ``timeout_s``: how long a collective may wait. False when not under torchrun."""
    global _STORE
    if not under_torchrun() or is_distributed():
        return is_distributed()
    if backend == "auto":
        backend = "nccl" if device.type == "cuda" else "gloo"
    timeout = datetime.timedelta(seconds=timeout_s)
    kwargs: dict[str, Any] = {"backend": backend, "timeout": timeout}
    kwargs.update(process_group_kwargs(device))
    store = _STORE = _attempt_store(timeout)
    if store is not None:
        kwargs.update(store=store, rank=int(os.environ["RANK"]), world_size=env_world_size())
    dist.init_process_group(**kwargs)
    if store is not None:  # where this rank runs: a rank whose process has ended is named as gone (``gone``)
        post(store, f"process/{get_rank()}", f"{socket.gethostname()} {os.getpid()}")
    global _FLAGS_GROUP
    _FLAGS_GROUP = dist.new_group(backend="gloo")
    return True


def _attempt_store(timeout: datetime.timedelta) -> dist.Store | None:
    """The rendezvous store of this torchrun attempt, under a key prefix of its own.

    A group restarted by ``torchrun --max-restarts`` reuses torchrun's store; with the default keys the new
    workers can read the dead attempt's addresses and fail to connect ("Gloo connectFullMesh failed ...
    Connection refused"; seen here in 1 of 3 restarts). None when not under torchrun (plain env:// then).
    """
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    if attempt is None or "MASTER_ADDR" not in os.environ or "RANK" not in os.environ:
        return None
    agent_hosts_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        env_world_size(),
        is_master=not agent_hosts_store and os.environ["RANK"] == "0",
        timeout=timeout,
        multi_tenant=not agent_hosts_store,
    )
    return dist.PrefixStore(f"simplepose/attempt_{attempt}", store)


def post(store: dist.Store, key: str, value: str) -> None:
    """Set ``key`` to ``value`` in a rendezvous store, so that ``posted`` finds it."""
    store.set(key, value)
    store.add(f"{key}/posted", 1)


def posted(store: dist.Store, key: str) -> bool:
    """Whether ``key`` was set by ``post``, without waiting for it: its counter, read by ``add(..., 0)``, which the
    stores of every torch release have (torch 2.2's Python API has no ``Store.check``, and its ``compare_set`` of a key
    that is set crashes the process)."""
    return int(store.add(f"{key}/posted", 0)) > 0


def get_store() -> dist.Store | None:
    """The rendezvous store of this torchrun attempt (None outside torchrun)."""
    return _STORE


def compare_notes(
    store: dist.Store | None,
    topic: str,
    rank: int,
    world_size: int,
    mine: str,
    wait_s: float,
    enough: Callable[[dict[int, str]], bool] | None = None,
) -> dict[int, str]:
    """Post this rank's note on ``topic`` to ``store`` and collect the other ranks' (rank -> note), those that answer
    within ``wait_s`` seconds, or fewer once ``enough(seen)`` holds. Only this rank's note when there is no store or
    it is gone (with a dead rank that hosted it)."""
    seen = {rank: mine}
    if store is None:
        return seen
    try:
        post(store, f"{topic}/{rank}", mine)
        deadline = time.monotonic() + wait_s
        while len(seen) < world_size and time.monotonic() < deadline and not (enough and enough(seen)):
            for r in range(world_size):
                if r not in seen and posted(store, f"{topic}/{r}"):
                    seen[r] = store.get(f"{topic}/{r}").decode()
            time.sleep(0.1)
    except Exception:  # noqa: BLE001  a store gone with a dead rank: what this rank knows
        pass
    return seen


def gone(rank: int) -> bool:
    """True when ``rank``'s process ran on this host and has ended (killed, crashed); False when it lives, runs on
    another host, or cannot be looked up (no store, or the store is gone)."""
    store = _STORE
    try:
        if store is None or not posted(store, f"process/{rank}"):
            return False
        host, pid = store.get(f"process/{rank}").decode().rsplit(" ", 1)
    except Exception:  # noqa: BLE001  the store went with a dead rank
        return False
    if host != socket.gethostname():
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:  # a zombie (ended, not yet reaped by torchrun) has ended too
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:  # no /proc (macOS): ask the process table
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except OSError:
            pass
        return False


def forget_group() -> None:
    """A peer of the group is gone (``utils.peers``): ``cleanup`` then forgets the group without a goodbye, which
    could wait for the dead rank (NCCL)."""
    global _GROUP_BROKEN
    _GROUP_BROKEN = True


def cleanup() -> None:
    """Leave the process group. The store stays readable (``get_store``) until the next ``init_distributed``: a rank
    that lost a peer at the start asks it who is gone after it has left (``utils.peers``)."""
    global _FLAGS_GROUP, _GROUP_BROKEN
    if is_distributed() and not _GROUP_BROKEN:
        dist.destroy_process_group()
    _FLAGS_GROUP, _GROUP_BROKEN = None, False


_BEFORE_COLLECTIVE: list[Callable[[], None]] = []  # called before each collective below (``before_collectives``)


@contextmanager
def before_collectives(check: Callable[[], None]) -> Iterator[None]:
    """``check()`` on every rank before each collective of this module's (``all_gather_object``, ``broadcast_object``,
    ``all_reduce_mean``; not ``AgreedFlags``) while the block runs, under several processes: a point where every
    rank is, where they can agree to leave the block together (``check`` raises on every rank) instead of one
    waiting in a collective for a rank that left (engine/validation.py's stop signals)."""
    _BEFORE_COLLECTIVE.append(check)
    try:
        yield
    finally:
        _BEFORE_COLLECTIVE.remove(check)


def _before_collective() -> None:
    for check in list(_BEFORE_COLLECTIVE):
        check()


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def all_gather_object(obj: Any) -> list[Any]:
    """Gather any picklable object from every rank; returns the list in rank order (all ranks get it)."""
    if not is_distributed():
        return [obj]
    _before_collective()
    out: list[Any] = [None] * get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Send ``obj`` from rank ``src`` to every rank."""
    if not is_distributed():
        return obj
    _before_collective()
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


T = TypeVar("T")


def agreed(check: Callable[[], T]) -> T:
    """``check()`` on every rank, and one verdict for all (a collective): when it raises a ``UserError`` on any rank,
    every rank raises one with the same message (the lowest failing rank's; when only some ranks failed, the message
    says which, e.g. a file that is not on every node), so that no rank goes on to wait for the others. Returns this
    rank's result."""
    from simplepose.utils.errors import UserError

    try:
        value, error = check(), None
    except UserError as e:
        value, error = None, e
    seen = all_gather_object(None if error is None else (str(error), error.file, error.key))
    failed = [(rank, e) for rank, e in enumerate(seen) if e is not None]
    if not failed:
        return value  # type: ignore[return-value]
    _, (message, file, key) = failed[0]
    if len(failed) < len(seen):
        ranks = ", ".join(str(rank) for rank, _ in failed)
        message += f" (on rank {ranks} of {len(seen)} processes only: is the path on every node's filesystem?)"
    if error is not None and str(error) == message:
        raise error
    raise UserError(message, file=file, key=key)


def all_reduce_mean(t: torch.Tensor) -> torch.Tensor:
    """Mean of a tensor over ranks (a new tensor; the input is unchanged)."""
    if not is_distributed():
        return t
    _before_collective()
    t = t.detach().clone()
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t / get_world_size()


def average_(tensors: list[torch.Tensor]) -> None:
    """Replace each tensor (floating point, on one device) by its mean over the ranks, in place, with one all-reduce
    of their concatenation; no host read. Every rank gets the same bits."""
    if not is_distributed() or not tensors:
        return
    flat = torch.cat([t.detach().reshape(-1) for t in tensors])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= get_world_size()
    with torch.no_grad():
        for t, part in zip(tensors, flat.split([t.numel() for t in tensors])):
            t.copy_(part.view_as(t))


def all_ranks(flag: torch.Tensor) -> torch.Tensor:
    """A 0-d bool tensor, True where ``flag`` is True on every rank; decided on the device (no host read)."""
    if not is_distributed():
        return flag
    t = flag.to(torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return t.bool()


def shard(n: int, rank: int | None = None, world: int | None = None) -> range:
    """Indices of ``n`` items this rank handles: a strided split with no padding and no duplicates."""
    rank = get_rank() if rank is None else rank
    world = get_world_size() if world is None else world
    return range(rank, n, world)


class AgreedFlags:
    """``size`` small integers each rank gives at every step boundary, and the maximum over the ranks that every rank
    receives: one decision for all (to checkpoint, to stop) without a device sync or a wait. In one process the values
    come back at once; with several, those given at boundary k are received at boundary k + 1 (a CPU all-reduce over
    gloo, started at k and long finished by k + 1), or at once with ``now`` (a blocking exchange, at an epoch end).
    Every rank calls ``exchange`` at the same boundaries."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._pending: tuple[Any, torch.Tensor] | None = None

    def exchange(self, values: list[int], now: bool = False) -> list[int]:
        """Give this rank's ``values``; returns the agreed ones (see the class; with ``now``, the maximum of those
        still under way and of ``values``)."""
        if not is_distributed():
            return list(values)
        received = [0] * self.size
        if self._pending is not None:
            work, t = self._pending
            work.wait()
            received = [int(v) for v in t.tolist()]
            self._pending = None
        t = torch.tensor(values, dtype=torch.int64)
        group = _FLAGS_GROUP if _FLAGS_GROUP is not None else dist.group.WORLD
        work = dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group, async_op=True)
        if not now:
            self._pending = (work, t)
            return received
        work.wait()
        return [max(a, int(b)) for a, b in zip(received, t.tolist())]

    def drop(self) -> None:
        """Forget the exchange under way (training ended: a rank that failed may never give its part)."""
        self._pending = None
