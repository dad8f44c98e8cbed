"""train.compile: the compiled model + loss against eager in float64 (outputs, gradients, BatchNorm statistics), with
activation checkpointing; the trainer's choice, its log lines, accumulation and checkpoints of a compiled run.

Traced with the ``aot_eager`` backend (dynamo + AOT autograd, the graphs inductor receives, run by eager kernels):
inductor's C++ builds take 2-3 minutes for one forward of the quick-start model on this 2-core CPU, too slow for
the suite; its float64 match (outputs 5e-15, gradients 3e-10) was measured by hand (docs/benchmarks.md).
"""

from __future__ import annotations

import copy
import dataclasses
import logging

import pytest
import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

import simplepose.engine.compile as ec
import simplepose.engine.trainer as trainer_module
from simplepose.checkpoint.format import Checkpoint
from simplepose.config.config_file import load_config
from simplepose.config.skeleton_file import skeleton_of
from simplepose.engine.trainer import Trainer
from simplepose.models import MultiTaskLoss, build_model
from tests.helpers import saved_state, tiny_cfg
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.usefixtures("one_thread")

CASES = {
    # the quick-start model, compiled with activation checkpointing, against the plain eager network
    "quickstart-checkpointed": ("quickstart.yaml", ["model.checkpoint_activations=true"]),
    # the paper's widths (256 channels, +128 per scale, SE heads) with 2 of its 4 stacks: a merge between stacks
    "paper-2-stacks": ("simplepose_coco.yaml", ["model.stacks=2", "loss.stack_weights=[1,1]"]),
}


def as_float64_batch(cfg, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    size = cfg.data.input_size
    images = torch.rand(2, 3, size, size, generator=g, dtype=torch.float64)
    shapes = [(2, skeleton_of(cfg).num_channels, size // 4 >> k, size // 4 >> k) for k in range(cfg.model.num_scales)]
    targets = [torch.rand(s, generator=g, dtype=torch.float64) for s in shapes]
    masks = [(torch.rand((s[0], 1, *s[2:]), generator=g) > 0.2).double() for s in shapes]
    return images, targets, masks


@pytest.mark.parametrize("case", list(CASES))
def test_compiled_model_and_loss_match_eager_in_float64(case, caplog):
    preset, extra = CASES[case]
    cfg = load_config(REPO_ROOT / "config" / preset, ["data.input_size=64", *extra])
    torch.manual_seed(0)
    compiled_model = build_model(cfg).double().train()
    eager_model = copy.deepcopy(compiled_model)
    eager_model.cfg = dataclasses.replace(cfg.model, checkpoint_activations=False)
    loss = MultiTaskLoss(cfg, skeleton_of(cfg)).double()

    def step(model):
        def forward_loss(images, targets, masks):
            outputs = model(images)
            return outputs, *loss(outputs, targets, masks)

        return forward_loss

    images, targets, masks = as_float64_batch(cfg)
    eager_out, eager_total, eager_parts = step(eager_model)(images, targets, masks)
    eager_total.backward()
    fn = ec.compile_forward_loss(step(compiled_model), backend="aot_eager")
    with caplog.at_level(logging.INFO, logger="simplepose.engine.compile"):
        out, total, parts = fn(images, targets, masks)
    total.backward()
    assert "compiled model + loss: first call (trace + compile + run) took" in caplog.text
    assert compiled_model.recomputes_activations() == (case == "quickstart-checkpointed")

    for stack_a, stack_b in zip(eager_out, out, strict=True):
        for a, b in zip(stack_a, stack_b, strict=True):
            torch.testing.assert_close(b, a, rtol=0, atol=1e-8)
    torch.testing.assert_close(total, eager_total, rtol=0, atol=1e-8)
    for k in eager_parts:
        torch.testing.assert_close(parts[k], eager_parts[k], rtol=0, atol=1e-8)
    for (name, p), q in zip(eager_model.named_parameters(), compiled_model.parameters(), strict=True):
        assert q.grad is not None, name
        torch.testing.assert_close(q.grad, p.grad, rtol=0, atol=1e-8, msg=name)
    batchnorm = {n: b for n, b in eager_model.named_buffers() if "running" in n or "num_batches" in n}
    assert batchnorm
    compiled_buffers = dict(compiled_model.named_buffers())
    for name, b in batchnorm.items():
        assert not torch.equal(b, torch.zeros_like(b)) or "num_batches" in name
        torch.testing.assert_close(compiled_buffers[name], b, rtol=0, atol=1e-8, msg=name)  # updated exactly once


def test_compile_auto_is_on_for_cuda_and_off_on_the_cpu():
    assert ec.choose_compile("auto", torch.device("cuda", 0)).enabled
    off = ec.choose_compile("auto", torch.device("cpu"))
    assert not off.enabled and "measured no gain" in off.reason
    assert ec.choose_compile("on", torch.device("cpu")).enabled
    assert not ec.choose_compile("off", torch.device("cuda")).enabled
    assert not ec.choose_compile("auto", torch.device("cuda", 0), "data_parallel").enabled
    assert ec.choose_compile("auto", torch.device("cuda", 0), "distributed").enabled


def test_a_compiled_run_accumulates_like_eager_and_its_checkpoint_loads_plainly(synthetic_h5_64, tmp_path, caplog,
                                                                                monkeypatch):  # fmt: skip
    monkeypatch.setattr(ec, "BACKEND", "aot_eager")
    extra = ["train.max_steps_per_epoch=2", "train.accumulate_steps=2", "train.optimizer=adam", "train.lr=1e-3",
             "train.ema=0.5", "train.ema_warmup_steps=1"]  # fmt: skip
    weights, averages = {}, {}
    for setting in ("off", "on"):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="simplepose.engine"):
            t = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / setting, f"train.compile={setting}", *extra))
            t.fit()
        messages = [r.getMessage() for r in caplog.records]
        assert messages[0].startswith(f"compile: {setting} (train.compile={setting}")  # the run's first line
        assert any("compiled model + loss: first call" in m for m in messages) == (setting == "on")
        last = Checkpoint.load(tmp_path / setting / "last.pt")
        weights[setting], averages[setting] = last.model, saved_state(last).ema["model"]
    assert weights["on"].keys() == weights["off"].keys()  # no _orig_mod. prefixes: the module is not wrapped
    for name, w in weights["off"].items():
        torch.testing.assert_close(weights["on"][name], w, rtol=1e-5, atol=1e-6, msg=name)
        # the weight average reads the parameters the compiled step updates
        torch.testing.assert_close(averages["on"][name], averages["off"][name], rtol=1e-5, atol=1e-6, msg=name)
    plain = build_model(load_config(REPO_ROOT / "config" / "tiny.yaml"))
    plain.load_state_dict(weights["on"])  # strict


def _failing_backend(graph_module, example_inputs):
    raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")


def test_auto_falls_back_to_eager_when_the_compiler_fails_and_on_raises(caplog):
    def forward_loss(x):
        return (x * 2).sum(), {"x": x}

    x = torch.arange(4.0)
    auto = ec.compile_forward_loss(forward_loss, backend=_failing_backend, fall_back=True)
    with caplog.at_level(logging.WARNING, logger="simplepose.engine.compile"):
        total, _ = auto(x)
    assert total.item() == 12.0 and auto.fn is forward_loss  # eager from now on
    assert "C compiler" in caplog.text and "training eagerly" in caplog.text
    assert auto(x)[0].item() == 12.0

    on = ec.compile_forward_loss(forward_loss, backend=_failing_backend, fall_back=False)
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed):
        on(x)


def _backend(fail_backward_graph: int | None = None, error: BaseException | None = None):
    """AOT autograd with eager kernels (``aot_eager``'s graphs) whose backward compiler fails with ``error`` at its
    ``fail_backward_graph``-th graph (1: the first)."""
    graphs = {"backward": 0}

    def forward_compiler(gm, example_inputs):
        return make_boxed_func(gm.forward)

    def backward_compiler(gm, example_inputs):
        graphs["backward"] += 1
        if graphs["backward"] == fail_backward_graph:
            raise error or RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=forward_compiler, bw_compiler=backward_compiler)


class TwoBlocks(torch.nn.Module):
    """conv -> BN, a graph break, conv -> BN: two graphs, the first of which runs before the second is compiled."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)
        self.conv2, self.bn2 = torch.nn.Conv2d(4, 4, 3), torch.nn.BatchNorm2d(4)

    def forward(self, x):
        x = self.bn1(self.conv1(x))
        torch._dynamo.graph_break()
        return self.bn2(self.conv2(x))


@pytest.mark.parametrize("failing_graph", [1, 2])
def test_auto_falls_back_when_the_backward_graph_cannot_be_built_with_batchnorm_updated_once(failing_graph, caplog):
    """The backward compiler fails for the first graph (nothing has run) or for the second (the first graph has
    run and updated bn1): the step runs eagerly, every BatchNorm statistic updated once, gradients and the optimiser
    step as eager training's."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = TwoBlocks().train()
    eager = copy.deepcopy(model)
    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))

    def step(m):
        def forward_loss(images):
            return m(images).square().mean(), {}

        return forward_loss

    eager_step = step(model)
    auto = ec.compile_forward_loss(eager_step, backend=_backend(failing_graph), fall_back=True, state=[model])
    optimisers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, eager)]
    for _ in range(2):
        with caplog.at_level(logging.WARNING, logger="simplepose.engine.compile"):
            total, _ = auto(x)
        total.backward()
        want, _ = step(eager)(x)
        want.backward()
        torch.testing.assert_close(total, want, rtol=0, atol=0)
        for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=0, msg=name)
        for o in optimisers:
            o.step()
            o.zero_grad()
        for (name, b), c in zip(model.named_buffers(), eager.buffers(), strict=True):
            torch.testing.assert_close(b, c, rtol=0, atol=0, msg=name)  # updated once per step, as eager
    assert model.bn1.num_batches_tracked.item() == model.bn2.num_batches_tracked.item() == 2
    assert caplog.text.count("training eagerly") == 1 and "C compiler" in caplog.text
    assert auto.fn is eager_step  # the eager function from the first step on


@pytest.mark.parametrize("error", [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
                                   AssertionError("inductor: a bug"),
                                   RuntimeError("t.dim() == 4 INTERNAL ASSERT FAILED at aten/src/...")],
                         ids=["out-of-memory", "assertion", "internal-assert"])  # fmt: skip
def test_auto_raises_out_of_memory_and_internal_assertions_of_the_compiler_as_they_are(error, caplog):
    torch._dynamo.reset()
    model = TwoBlocks().train()

    def forward_loss(images):
        return model(images).square().mean(), {}

    auto = ec.compile_forward_loss(forward_loss, backend=_backend(1, error), fall_back=True, state=[model])
    with caplog.at_level(logging.WARNING, logger="simplepose.engine.compile"), pytest.raises(type(error)) as raised:
        auto(torch.rand(2, 3, 8, 8))
    assert raised.value is error and "training eagerly" not in caplog.text
    assert auto.compile_s is None and auto.fn is not forward_loss  # not switched to eager


def test_a_backward_compile_failure_under_auto_trains_as_eager_training_does(synthetic_h5_64, tmp_path, caplog,
                                                                             monkeypatch):  # fmt: skip
    """The trainer with train.compile=auto where it compiles (CUDA; here forced), a compiler whose backward fails:
    the weights and BatchNorm statistics after two steps are eager training's (train.compile=off) exactly."""
    extra = ["train.max_steps_per_epoch=2", "train.optimizer=adam", "train.lr=1e-3"]
    states = {}
    for setting in ("off", "auto"):
        torch._dynamo.reset()
        if setting == "auto":
            monkeypatch.setattr(ec, "BACKEND", _backend(1))
            monkeypatch.setattr(trainer_module, "choose_compile",
                                lambda *a: ec.CompileChoice(True, "train.compile=auto: on (the test's)"))  # fmt: skip
        with caplog.at_level(logging.WARNING, logger="simplepose.engine.compile"):
            Trainer(tiny_cfg(synthetic_h5_64, tmp_path / setting, f"train.compile={setting}", *extra)).fit()
        states[setting] = Checkpoint.load(tmp_path / setting / "last.pt").model
    assert "the compiler failed (RuntimeError: Failed to find C compiler" in caplog.text
    batchnorm = [n for n in states["off"] if "num_batches_tracked" in n]
    assert batchnorm and all(states["auto"][n].item() == 2 for n in batchnorm)  # two steps, updated once each
    for name, w in states["off"].items():
        torch.testing.assert_close(states["auto"][name], w, rtol=0, atol=0, msg=name)
