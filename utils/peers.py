"""A peer lost by a multi-process run: when a collective fails because another rank is gone (killed, crashed, its node
lost), this rank ends with one line that names that rank, where the run was, and how it continues, instead of
gloo's or NCCL's traceback.

    with peer_loss_named(where, hint):    # engine.run, around the run; where(): the position, hint(): how to go on
        ...

On such a failure (``collective_failure``) the rank posts a note to the rendezvous store and reads the other ranks'
for up to ``ANSWER_S`` seconds: a rank whose process has ended on this host is named as gone, one on another host
that does not answer as silent. When every rank answers, no peer is lost and the error goes on as it was (a bug
keeps its traceback). Otherwise the line is written at once, torchrun's SIGTERM to the ranks left is ignored from
then on, and the process ends with ``EXIT_PEER_LOST`` (as a stall, ``utils.watchdog``: a restart under
``torchrun --max-restarts`` resumes from last.pt). A peer that hangs without dying is the watchdog's to name.
"""

from __future__ import annotations

import logging
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch.distributed as dist

from simplepose.utils import distributed as du
from simplepose.utils.errors import Stopped
from simplepose.utils.watchdog import EXIT_STALLED, continue_hint, stall_reported

log = logging.getLogger(__name__)

EXIT_PEER_LOST = EXIT_STALLED  # sysexits' EX_TEMPFAIL: the group can try again (a restart resumes)
STALL_REPORT_S = 30.0  # the longest a stall report takes before the watchdog exits (its waits: 3 s + 3 s)
ANSWER_S = 10.0  # how long a rank waits for the others' notes (torchrun gives its workers 30 s after a SIGTERM)
_SOURCE_PREFIX = re.compile(r"^\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*")  # gloo's "[.../pair.cc:545] "
# words of the errors gloo and NCCL raise as a plain RuntimeError when a peer is gone or a collective timed out
_COLLECTIVE_WORDS = ("gloo", "nccl", "processgroup", "c10d", "connection closed by peer", "connection reset by peer")


class PeerLost(Stopped):
    """This rank stops because a peer of its group is gone (its line already said): ``EXIT_PEER_LOST``."""


def collective_failure(error: BaseException) -> bool:
    """True when ``error`` is what a collective or the rendezvous store raises when a peer fails (torch's
    ``DistError`` family, or gloo's and NCCL's ``RuntimeError``), in a group of several processes."""
    if not du.under_torchrun() or du.env_world_size() < 2:
        return False
    if isinstance(error, dist.DistError):
        return True
    return isinstance(error, RuntimeError) and any(w in str(error).lower() for w in _COLLECTIVE_WORDS)


def lost_ranks(wait_s: float = ANSWER_S) -> tuple[list[int], list[int]] | None:
    """(the ranks whose process has ended on this host, the ranks that did not answer within ``wait_s``), from the
    notes every rank that meets the failure posts; None when this cannot be learnt (no rendezvous store, or it went
    with a dead rank)."""
    rank, world = du.launch_rank(), du.env_world_size()  # also after the group was left (``du.cleanup``)
    store = du.get_store()
    seen = du.compare_notes(
        store, "peer_lost", rank, world, "1", wait_s, enough=lambda s: all(r in s or du.gone(r) for r in range(world))
    )
    if store is None or (len(seen) == 1 and not any(du.gone(r) for r in range(world) if r != rank)):
        try:  # one answer only: is the store itself still there?
            if store is None or not du.posted(store, f"peer_lost/{rank}"):
                return None
        except Exception:  # noqa: BLE001  the store went with the rank that hosted it
            return None
    missing = [r for r in range(world) if r not in seen]
    ended = [r for r in missing if du.gone(r)]
    return ended, [r for r in missing if r not in ended]


def cause(error: BaseException) -> str:
    """The gist of a collective's error: its first sentence, without gloo's source file prefix
    (``[.../pair.cc:545] Read error [127.0.0.1]:10652: Connection reset by peer. This is typically ...``)."""
    text = _SOURCE_PREFIX.sub("", str(error).strip().split("\n", 1)[0])
    text = text.split(". ", 1)[0].rstrip(".")
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def peer_lost_line(error: BaseException, where: str, hint: str, lost: tuple[list[int], list[int]] | None) -> str:
    """The one line of a rank that lost a peer: which rank (as far as can be known), where, the error's gist, and
    ``hint`` (the checkpoint the run continues from and the command)."""
    if lost is None:
        who = "which rank could not be learnt (the rendezvous store is gone too)"
    else:
        ended, silent = lost
        parts = [f"rank {', '.join(map(str, ended))} is gone (its process ended)"] if ended else []
        parts += [f"no answer from rank {', '.join(map(str, silent))} (its process or node lost)"] if silent else []
        who = ", ".join(parts)
    return (
        f"error: rank {du.launch_rank()} lost a peer at {where}: {who}; {cause(error)}. The run stops here (exit "
        f"code {EXIT_PEER_LOST}); {hint}; under torchrun --max-restarts the group restarts and resumes from last.pt "
        f"by itself"
    )


@contextmanager
def peer_loss_named(where: Callable[[], str], hint: Callable[[], str]) -> Iterator[None]:
    """Around a multi-process run: a collective that fails because a peer is gone ends the block with ``PeerLost``
    (its line: see ``peer_lost_line``; ``where()``: the run's position, ``hint()``: how it continues); any other
    error, or one that every rank met alike, goes on unchanged. A stall's line (``utils.watchdog``) ends with
    ``hint()`` too. Used around the run's training (inside the stop handlers' and the process group's lifetime) and
    around the whole run (its start's collectives); the inner one names the loss first."""
    try:
        with continue_hint(hint):
            yield
    except Exception as e:
        if not collective_failure(e):
            raise
        if stall_reported():  # the peer left after a stall this rank's watchdog is reporting: its line is this rank's
            time.sleep(STALL_REPORT_S)  # the watchdog ends the process within that time
        # torchrun's agent sends SIGTERM to the workers left when one fails: this one is ending already, and says
        # why first (as it would with the stop handlers of utils.stop_signals, gone by now)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        lost = lost_ranks()
        if lost is not None and not any(lost):  # every rank answered: none is lost, the error is something else
            raise
        log.debug("collective failed after a peer was lost", exc_info=True)
        du.forget_group()
        # said at once, in one write (the ranks share stderr), then the process ends quietly with its status
        sys.stderr.write(f"\n{peer_lost_line(e, where(), hint(), lost)}\n")
        sys.stderr.flush()
        raise PeerLost("", EXIT_PEER_LOST) from None
