"""A note of one rank in the rendezvous store is looked up by another without waiting for it
(``utils.distributed.post`` / ``posted``): through ``Store.add``, which every supported torch release's stores have.
torch 2.2 (the floor job, .ci/floors) has no ``Store.check`` and crashes in ``compare_set`` of a key that is set;
there too a stop posted by one rank must be seen by the others, and a lost peer's note must be found."""

from __future__ import annotations

import datetime

import pytest
import torch.distributed as dist

from simplepose.utils import distributed as du
from simplepose.utils import stop_signals


def stores(tmp_path) -> list:
    """A TCP store under a prefix (as torchrun's), a plain TCP, a hash and a file store."""
    tcp = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=10))
    return [dist.PrefixStore("run", tcp), dist.TCPStore("127.0.0.1", 0, 1, True), dist.HashStore(),
            dist.FileStore(str(tmp_path / "store"), 1)]  # fmt: skip


def test_a_posted_key_is_found_and_looking_changes_nothing(tmp_path):
    for store in stores(tmp_path):
        assert not du.posted(store, "simplepose/stop/0")
        assert not du.posted(store, "simplepose/stop/0")  # looking did not post it
        du.post(store, "simplepose/stop/0", "15")
        assert du.posted(store, "simplepose/stop/0") and store.get("simplepose/stop/0") == b"15"
        du.post(store, "simplepose/stop/0", "15")  # posted again (a second rank): found, the same value
        assert du.posted(store, "simplepose/stop/0") and store.get("simplepose/stop/0") == b"15"


def test_a_stop_posted_by_one_rank_is_read_by_another(monkeypatch):
    store = dist.HashStore()
    monkeypatch.setattr(du, "get_store", lambda: store)
    monkeypatch.setattr(stop_signals, "_received", 0)
    assert stop_signals.requested_in_group() == 0  # no rank has asked: no wait
    monkeypatch.setattr(stop_signals, "_received", 15)  # this process received SIGTERM: it posts it
    assert stop_signals.requested_in_group() == 15
    monkeypatch.setattr(stop_signals, "_received", 0)  # another rank, which received nothing, reads it
    assert stop_signals.requested_in_group() == 15


@pytest.mark.parametrize("store_kind", ["tcp", "hash"])
def test_the_notes_other_ranks_posted_are_collected(store_kind):
    if store_kind == "tcp":
        store = dist.PrefixStore("run", dist.TCPStore("127.0.0.1", 0, 1, True))
    else:
        store = dist.HashStore()
    du.post(store, "peer_lost/1", "1")  # rank 1 has posted its note; rank 2 never will
    seen = du.compare_notes(store, "peer_lost", rank=0, world_size=3, mine="1", wait_s=0.3)
    assert seen == {0: "1", 1: "1"}
