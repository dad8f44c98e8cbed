"""Mixed precision is chosen by what the hardware computes natively, never by the device type alone."""

from __future__ import annotations

import logging

import pytest
import torch

import simplepose.utils.precision as up
from simplepose.config.config_file import load_config
from simplepose.engine.trainer import Trainer
from simplepose.utils.errors import UserError
from tests.helpers import saved_state
from tests.paths import TINY_PRESET

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)
NATIVE_CPU = up.Capabilities(True, "CPU with AVX512-BF16")
AVX2_CPU = up.Capabilities(False, "CPU without AVX512-BF16 or AMX")
AMPERE = up.Capabilities(True, "NVIDIA A100 (compute 8.0)")
VOLTA = up.Capabilities(False, "Tesla V100 (compute 7.0)")

# (setting, device, capabilities) -> (autocast dtype, GradScaler)
TABLE = [
    ("auto", CPU, NATIVE_CPU, torch.bfloat16, False),
    ("auto", CPU, AVX2_CPU, None, False),
    ("auto", CUDA, AMPERE, torch.bfloat16, False),
    ("auto", CUDA, VOLTA, torch.float16, True),
    ("off", CPU, NATIVE_CPU, None, False),
    ("off", CUDA, AMPERE, None, False),
    ("bf16", CPU, AVX2_CPU, torch.bfloat16, False),
    ("bf16", CUDA, AMPERE, torch.bfloat16, False),
    ("fp16", CUDA, AMPERE, torch.float16, True),
    ("fp16", CUDA, VOLTA, torch.float16, True),
]


@pytest.mark.parametrize("setting, device, caps, dtype, scaler", TABLE)
def test_decision_table(setting, device, caps, dtype, scaler):
    p = up.choose_precision(setting, device, caps)
    assert (p.dtype, p.grad_scaler) == (dtype, scaler)
    assert p.reason.startswith(f"train.amp={setting}") and caps.description in p.reason or setting == "off"


def test_bf16_asked_where_it_is_not_native_warns_and_fp16_on_a_cpu_is_refused():
    assert "warning" in up.choose_precision("bf16", CPU, AVX2_CPU).reason
    assert "warning" not in up.choose_precision("bf16", CPU, NATIVE_CPU).reason
    with pytest.raises(UserError) as e:
        up.choose_precision("fp16", CPU, NATIVE_CPU, key="eval.amp")
    assert e.value.key == "eval.amp"


def test_the_probe_answers_on_this_machine():
    caps = up.probe_capabilities(CPU)
    assert isinstance(caps.native_bf16, bool) and caps.description.startswith("CPU")


def test_bf16_held_back_by_onednns_isa_limit_is_not_native(monkeypatch):
    """ONEDNN_MAX_CPU_ISA=AVX2 (as users narrow it, and as the suite is run to stand in for AVX2-only CPUs) makes
    the convolutions emulate bf16 on a CPU that has it: auto must then choose float32."""
    monkeypatch.setattr(up, "_cpu_flag", lambda name: name == "_is_avx512_bf16_supported")
    for value, held in (("AVX2", True), ("avx512_core", True), ("AVX512_CORE_BF16", False), ("AVX512_CORE_AMX", False),
                        ("", False), ("SOMETHING_NEW", False)):  # fmt: skip
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", value)
        caps = up.probe_capabilities(CPU)
        assert caps.native_bf16 is not held, value
        assert ("held back by ONEDNN_MAX_CPU_ISA" in caps.description) is held
        chosen = up.choose_precision("auto", CPU, caps)
        assert chosen.dtype is (None if held else torch.bfloat16)


def test_a_run_on_a_cpu_without_native_bf16_says_it_chose_float32(synthetic_h5_64, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(up, "probe_capabilities", lambda device: AVX2_CPU)
    cfg = load_config(TINY_PRESET, [f"data.train={synthetic_h5_64}", f"train.out_dir={tmp_path}", "train.amp=auto"])
    with caplog.at_level(logging.INFO, logger="simplepose.engine"):
        t = Trainer(cfg)
    assert t.precision.dtype is None and not t.scaler.is_enabled()
    assert "precision: float32 (train.amp=auto: float32 on the CPU without AVX512-BF16 or AMX" in caplog.text


def test_the_fp16_and_loss_scaling_path_of_gpus_runs_on_the_cpu(synthetic_h5_64, tmp_path, monkeypatch):
    """What train.amp=auto picks on GPUs without bf16 (fp16 autocast + GradScaler), forced on the CPU: overflowing
    gradients while the scale settles are the scaler's business (skipped silently, scale lowered), a non-finite
    loss is skipped and counted, steps apply once the scale fits, and the scaler's state is checkpointed."""
    import simplepose.engine.trainer as et
    from tests.harness.faulty_trainer import with_faults

    fp16 = up.Precision(torch.float16, True, "forced for the test")
    monkeypatch.setattr(et, "precision_for", lambda setting, device, key: fp16)
    extra = ["train.epochs=1", "train.max_steps_per_epoch=8", "train.optimizer=adam", "train.lr=1e-3"]
    cfg = load_config(TINY_PRESET, [f"data.train={synthetic_h5_64}", f"train.out_dir={tmp_path}", *extra])
    t = with_faults(et.Trainer(cfg), nan_steps={6})
    assert t.scaler.is_enabled()
    scale = t.scaler.get_scale()
    before = [p.detach().clone() for p in t.params]
    t.fit()
    assert t.position.counters["skipped_nonfinite"] == 1  # the NaN loss only, not the scaler's overflows
    assert t.scaler.get_scale() < scale
    assert all(torch.isfinite(p).all() for p in t.params)
    assert any(not torch.equal(a, b) for a, b in zip(before, t.params))  # some steps applied
    rows = [r for r in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"kind": "train"' in r]
    assert '"loss_scale"' in rows[-1]
    saved = saved_state(tmp_path / "last.pt").scaler
    assert saved and saved["scale"] == t.scaler.get_scale()
    resumed = et.Trainer(load_config(TINY_PRESET, [f"data.train={synthetic_h5_64}", f"train.out_dir={tmp_path}",
                                                   *extra, "train.resume=auto"]))  # fmt: skip
    assert resumed.scaler.get_scale() == t.scaler.get_scale()
