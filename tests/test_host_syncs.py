"""A training step reads nothing back to the host between log steps (counted with tests.host_syncs: the aten ops and
tensor methods that need values on the host), and the non-finite skip decided on the device still skips."""

from __future__ import annotations

import pytest
import torch

from simplepose.engine.hook_base import Hook
from simplepose.engine.trainer import Trainer
from tests.harness.faulty_trainer import with_faults
from tests.helpers import tiny_cfg
from tests.host_syncs import HostSyncCounter

pytestmark = pytest.mark.usefixtures("one_thread")


class CountSyncs(Hook):
    """Counts host reads from the start of each step (its batch loaded) to the end of every hook's after_step."""

    def __init__(self) -> None:
        self.per_step: dict[int, HostSyncCounter] = {}

    def before_step(self, progress) -> None:
        self.counter = HostSyncCounter().__enter__()

    def after_step(self, progress, result) -> None:
        self.counter.__exit__(None, None, None)
        self.per_step[progress.step] = self.counter


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_no_host_sync_between_log_steps(synthetic_h5_64, tmp_path, optimizer):
    cfg = tiny_cfg(synthetic_h5_64, tmp_path, "train.log_every=3", "train.max_steps_per_epoch=4",
                   f"train.optimizer={optimizer}")  # fmt: skip
    t = Trainer(cfg)
    assert t.device_skip  # the fused step is supported on this CPU (probed)
    counting = CountSyncs()
    t.register_hooks([counting])
    t.fit()
    steps = counting.per_step
    assert sorted(steps) == [1, 2, 3, 4]
    for s in (1, 2):  # between logs: not one read
        assert steps[s].count == 0, (s, steps[s].ops, steps[s].methods)
    assert steps[3].count > 0 and steps[4].count > 0  # the log steps read the figures: the counter sees reads


def test_a_step_skipped_on_the_device_leaves_weights_and_momentum_untouched(synthetic_h5_64, tmp_path):
    """SGD's fused step skipped on the first step (a NaN loss): no weight moves, the momentum stays zero (fused SGD
    would leave it uninitialised), the count reaches the host at the next settle, and the next step applies."""
    t = with_faults(Trainer(tiny_cfg(synthetic_h5_64, tmp_path, "train.max_steps_per_epoch=2")), nan_steps={0})
    assert t.device_skip and t.cfg.train.optimizer == "sgd"
    fault, p = t.hooks.hooks[-1], t.position
    before = [q.detach().clone() for q in t.params]
    batches = t.batches.epoch(0, 0)

    def step():
        fault.before_step(p)
        result = t.train_step(next(batches), lr=0.1)
        fault.after_step(p, result)
        p.step, p.global_step = p.step + 1, p.global_step + 1
        return result

    result = step()
    assert not bool(result.applied) and not torch.isfinite(result.loss)
    assert all(torch.equal(a, b) for a, b in zip(before, t.params))
    assert all(torch.equal(t.optimizer.state[q]["momentum_buffer"], torch.zeros_like(q)) for q in t.params)
    assert p.settle() == 1 and p.counters["skipped_nonfinite"] == 1
    result = step()  # the next step applies, from zero momentum (buf = grad, as an unskipped first step)
    assert bool(result.applied) and p.settle() == 0
    assert any(not torch.equal(a, b) for a, b in zip(before, t.params))
    assert all(torch.isfinite(q).all() for q in t.params)
