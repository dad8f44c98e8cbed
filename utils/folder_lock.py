"""One run per folder: a lock file that a run holds in its folder while it writes there, on one host or on a
shared (NFS-like) filesystem.

    lock = FolderLock.acquire(folder, stale_s=300)   # FolderHeld when a live run holds it; takes over a dead one's
    ...                                              # a thread refreshes it every refresh_s(stale_s) seconds
    lock.release()                                   # at every exit (a killed run's lock is taken over later)

    check_not_held(path, "--out")                    # a command that writes into a folder: refused while a run holds it

The lock is ``folder/.run.lock``, a small JSON record: host, pid, the process's start time (so that a reused pid
is told apart), when the run started and when it last refreshed the record. It is made atomically without relying
on ``O_EXCL`` (which older NFS does not honour): the record is written to a file of its own, then hard-linked to
the lock's name, which fails when the name exists. A lock found there belongs to a live run unless

- it names this host and its process is gone (or is another process under the same pid): the run died;
- it names another host and was not refreshed for ``stale_s`` seconds (that host's clock: clocks of a cluster
  agree to well within a minute): its run or its node died;
- it names the torchrun launch (``owner``) that this process belongs to: a restart of the same launch, whose
  earlier attempt torchrun has ended on every node.

Then it is taken over, with a line saying whose it was.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from simplepose.utils.errors import UserError

log = logging.getLogger(__name__)

LOCK_NAME = ".run.lock"


class FolderHeld(UserError):
    """A live run holds the folder."""


def refresh_s(stale_s: float) -> float:
    """How often a holder refreshes its lock: a fifth of the staleness window, at most every minute."""
    return max(0.05, min(60.0, stale_s / 5))


def process_start(pid: int) -> str:
    """The start time of process ``pid`` in clock ticks since boot (field 22 of /proc/PID/stat; "" without /proc):
    tells a reused pid apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


@dataclass
class LockRecord:
    """What the lock file says of its holder (times in seconds since the epoch, UTC)."""

    host: str
    pid: int
    started: float
    refreshed: float
    process_start: str = ""
    owner: str = ""  # the torchrun launch (its agent's identity) of the holder; "" outside torchrun
    token: str = ""  # tells this holder's record from another's with the same host and pid

    @classmethod
    def mine(cls, owner: str = "") -> LockRecord:
        now = time.time()
        pid = os.getpid()
        return cls(socket.gethostname(), pid, now, now, process_start(pid), owner, uuid.uuid4().hex)

    @classmethod
    def read(cls, path: Path) -> LockRecord | None:
        """The record in ``path``; None when it is gone; a record of unknown holder (refreshed at the file's change
        time) when it cannot be read as one."""
        try:
            text = path.read_text()
            stat = path.stat()
        except (FileNotFoundError, NotADirectoryError):  # no lock; a file where its folder would be
            return None
        try:
            d = json.loads(text)
            return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
        except (ValueError, TypeError, KeyError):
            return cls("?", 0, stat.st_mtime, stat.st_mtime)

    def since(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started))

    def describe(self) -> str:
        """``host H, pid P, since T (refreshed S s ago)``."""
        ago = max(0.0, time.time() - self.refreshed)
        return f"host {self.host}, pid {self.pid}, since {self.since()} (refreshed {ago:.0f} s ago)"

    def alive(self, stale_s: float, owners: frozenset[str] = frozenset()) -> bool:
        """Whether the run holding this record still runs (the module docstring)."""
        if self.owner and self.owner in owners:
            return False
        if self.host != socket.gethostname():
            return time.time() - self.refreshed <= stale_s
        if self.pid <= 0:
            return time.time() - self.refreshed <= stale_s
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process: alive
            pass
        started = process_start(self.pid)
        return not (self.process_start and started and started != self.process_start)

    def dumps(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"


class FolderLock:
    """The lock this process holds on ``folder``, refreshed by a daemon thread until ``release``."""

    def __init__(self, path: Path, record: LockRecord, stale_s: float) -> None:
        self.path, self.record, self.stale_s = path, record, stale_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._refresh_loop, name="folder-lock", daemon=True)
        self._thread.start()

    @classmethod
    def acquire(
        cls,
        folder: str | Path,
        stale_s: float,
        what: str = "the folder",
        owners: frozenset[str] = frozenset(),
        owner: str = "",
    ) -> FolderLock:
        """Hold ``folder`` (made when missing); ``FolderHeld`` naming the live run that holds it. ``what`` names
        the folder in messages (``train.out_dir=runs/x``); ``owners``: the torchrun agents of this process's launch
        (a lock of one of them is an earlier attempt's); ``owner``: this process's agent, recorded."""
        path = Path(folder) / LOCK_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        mine = LockRecord.mine(owner)
        for _ in range(5):  # a few rounds: another process may take over or release at the same moment
            if _link_new(path, mine.dumps()):
                return cls(path, mine, stale_s)
            found = LockRecord.read(path)
            if found is None:
                continue
            if found.alive(stale_s, owners):
                raise FolderHeld(held_message(what, found), file=path)
            if _take_over(path, found, mine.dumps()):
                log.warning(
                    "%s: took over the lock of a run that is no longer running (%s, last refreshed %s)",
                    what,
                    f"host {found.host}, pid {found.pid}, since {found.since()}",
                    time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(found.refreshed)),
                )
                return cls(path, mine, stale_s)
        raise FolderHeld(f"{what}: could not take its lock {path} (other processes keep changing it); try again")

    def holds(self) -> bool:
        """Whether the lock file is still this holder's."""
        found = LockRecord.read(self.path)
        return found is not None and found.token == self.record.token

    def refresh(self) -> None:
        """Write the record again with the time now (atomically: a reader sees the old or the new one)."""
        if not self.holds():
            log.warning("%s is no longer this run's lock (another process took it over)", self.path)
            self._stop.set()
            return
        self.record.refreshed = time.time()
        tmp = self.path.with_name(f"{LOCK_NAME}.{self.record.token}.tmp")
        tmp.write_text(self.record.dumps())
        os.replace(tmp, self.path)

    def _refresh_loop(self) -> None:
        while not self._stop.wait(refresh_s(self.stale_s)):
            try:
                self.refresh()
            except OSError as e:  # a full disk or a lost mount: the run's own writes report it
                log.warning("could not refresh the lock %s: %s", self.path, e)

    def release(self) -> None:
        """Stop refreshing and remove the lock file (when it is still this holder's)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        try:
            if self.holds():
                self.path.unlink()
        except OSError as e:
            log.warning("could not remove the lock %s: %s", self.path, e)

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def held_message(what: str, found: LockRecord) -> str:
    """The refusal naming the live run that holds ``what``."""
    return (
        f"{what} is in use by a live run ({found.describe()}); one folder holds one run: wait for that run to end "
        f"or stop it, or use another folder"
    )


def _link_new(path: Path, text: str) -> bool:
    """Create ``path`` holding ``text`` if it does not exist, atomically also over NFS: the text is written to a
    file of its own, then hard-linked to ``path``. False when ``path`` exists."""
    tmp = path.with_name(f"{LOCK_NAME}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def _take_over(path: Path, stale: LockRecord, text: str) -> bool:
    """Replace the lock of a dead run (``stale``, as read) by ours: moved aside first (a rename is atomic), and put
    back when what was moved is not that record (another process took it over in between)."""
    aside = path.with_name(f"{LOCK_NAME}.{uuid.uuid4().hex}.stale")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    try:
        moved = LockRecord.read(aside)
        if moved != stale:
            with contextlib.suppress(FileExistsError):
                os.link(aside, path)  # give it back to its holder
            return False
        return _link_new(path, text)
    finally:
        aside.unlink(missing_ok=True)


def held_by(folder: str | Path, stale_s: float = 300.0) -> LockRecord | None:
    """The live run holding ``folder``, None when none does."""
    found = LockRecord.read(Path(folder) / LOCK_NAME)
    return found if found is not None and found.alive(stale_s) else None


def check_not_held(path: str | Path, what: str, stale_s: float = 300.0) -> None:
    """``FolderHeld`` when ``path`` (a file or folder a command would write) lies in a folder a live run holds:
    its own folder or any above it. ``what`` names the setting or option (``--out``)."""
    for folder in [Path(path), *Path(path).resolve().parents]:
        found = held_by(folder, stale_s)
        if found is not None:
            raise FolderHeld(
                f"{what}={path} is inside {folder}, where a live run writes ({found.describe()}); write elsewhere "
                f"or wait for that run to end",
                file=path,
            )
