"""How the network runs at test time (evaluate/inference/inference_setup.py): ``eval.amp=auto`` and
``eval.channels_last=auto`` decided by what the device computes natively (capabilities injected), logged once; and
what bf16 and channels_last change in the people found."""

from __future__ import annotations

import logging

import cv2
import numpy as np
import pytest
import torch

import simplepose.evaluate.inference.inference_setup as inference_setup_module
import simplepose.utils.precision as up
from simplepose.codec.decoder.decode import decode_people
from simplepose.codec.person import keypoint_array
from simplepose.config.schema import EvalConfig, TargetConfig
from simplepose.evaluate.estimator import PoseEstimator
from simplepose.evaluate.inference.multiscale import multiscale_maps
from simplepose.evaluate.inference.oracle import annotation_oracle
from tests.helpers import (
    AGREEMENT_IMAGES,
    COCO,
    LANDSCAPE,
    PORTRAIT,
    assert_people_agree,
    people_agreement,
    pycocotools_coco,
    tiny_model,
)

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)
NATIVE_CPU = up.Capabilities(True, "CPU with AVX512-BF16")
AVX2_CPU = up.Capabilities(False, "CPU without AVX512-BF16 or AMX")
AMPERE = up.Capabilities(True, "NVIDIA A100 (compute 8.0)")
VOLTA = up.Capabilities(False, "Tesla V100 (compute 7.0)")
SMALL_EVAL = dict(scales=[1.0, 1.5], flip=True, boxsize=128)  # as the ONNX agreement test: fast, two scales + flip

# (eval settings, device, capabilities) -> (autocast dtype, channels_last)
TABLE = [
    ({"amp": "auto"}, CPU, NATIVE_CPU, torch.bfloat16, True),
    ({"amp": "auto"}, CPU, AVX2_CPU, None, False),  # float32: channels_last measured no faster, NCHW as before
    ({"amp": "auto", "channels_last": "on"}, CPU, AVX2_CPU, None, True),
    (
        {"amp": "auto"},
        CUDA,
        AMPERE,
        None,
        False,
    ),  # bf16 measured no faster at test time on an H200; channels_last unmeasured
    ({"amp": "auto"}, CUDA, VOLTA, None, False),  # never fp16 unasked at test time
    ({"amp": "bf16"}, CUDA, AMPERE, torch.bfloat16, False),
    ({"amp": "off"}, CPU, NATIVE_CPU, None, False),
    ({"amp": "bf16", "channels_last": "off"}, CPU, AVX2_CPU, torch.bfloat16, False),
    ({"amp": "fp16", "channels_last": "on"}, CUDA, VOLTA, torch.float16, True),
]


@pytest.mark.parametrize("settings, device, caps, dtype, channels_last", TABLE)
def test_decision_table(settings, device, caps, dtype, channels_last):
    chosen = inference_setup_module.choose_setup(EvalConfig(**settings), device, caps)
    assert (chosen.precision.dtype, chosen.channels_last) == (dtype, channels_last)
    assert chosen.precision.reason.startswith(f"eval.amp={settings.get('amp', 'auto')}")
    assert chosen.describe().startswith(f"{chosen.precision.name}, {'channels_last' if channels_last else 'NCHW'} (")


def test_training_keeps_its_gpu_choices_where_inference_keeps_float32():
    for caps, dtype, scaler in ((VOLTA, torch.float16, True), (AMPERE, torch.bfloat16, False)):
        train = up.choose_precision("auto", CUDA, caps)
        test_time = up.choose_precision("auto", CUDA, caps, "eval.amp", inference=True)
        assert (train.dtype, train.grad_scaler) == (dtype, scaler)
        assert (test_time.dtype, test_time.grad_scaler) == (None, False) and "no faster" in test_time.reason


def test_bf16_held_back_by_onednn_is_not_chosen_at_test_time(monkeypatch):
    """The AVX2 stand-in the suite also runs under (ONEDNN_MAX_CPU_ISA=AVX2 on a CPU with AVX512-BF16): float32."""
    monkeypatch.setattr(up, "_cpu_flag", lambda name: name == "_is_avx512_bf16_supported")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert inference_setup_module.inference_setup(EvalConfig(amp="auto"), CPU).precision.dtype is None
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    assert inference_setup_module.inference_setup(EvalConfig(amp="auto"), CPU).precision.dtype is torch.bfloat16


def test_the_choice_is_logged_once_per_process(monkeypatch, caplog):
    monkeypatch.setattr(inference_setup_module, "_LOGGED", set())
    monkeypatch.setattr(inference_setup_module, "probe_capabilities", lambda device: AVX2_CPU)
    model = tiny_model().eval()
    with caplog.at_level(logging.INFO, logger="simplepose.evaluate"):
        for _ in range(2):
            PoseEstimator.from_model(model, EvalConfig(amp="auto"), CPU)
        PoseEstimator.from_model(model, EvalConfig(amp="auto", channels_last="on"), CPU)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("inference:")]
    assert lines == [
        "inference: float32, NCHW (eval.amp=auto: float32 on the CPU without AVX512-BF16 or AMX (bf16 would be "
        "emulated, several times slower); eval.channels_last=auto: NCHW on the CPU in float32 (channels_last measured "
        "no faster))",
        "inference: float32, channels_last (eval.amp=auto: float32 on the CPU without AVX512-BF16 or AMX (bf16 would "
        "be emulated, several times slower); eval.channels_last=on)",
    ]


@pytest.mark.parametrize("rank, level", [("0", logging.INFO), ("1", logging.DEBUG), ("3", logging.DEBUG)])
def test_under_torchrun_only_rank_0_prints_the_inference_line(monkeypatch, caplog, rank, level):
    """Every torchrun rank builds an estimator; the ``inference:`` line is printed once, by rank 0 (RANK read before
    the process group exists), the others keep it at DEBUG."""
    monkeypatch.setattr(inference_setup_module, "_LOGGED", set())
    monkeypatch.setattr(inference_setup_module, "probe_capabilities", lambda device: AVX2_CPU)
    monkeypatch.setenv("RANK", rank)
    with caplog.at_level(logging.DEBUG, logger="simplepose.evaluate"):
        inference_setup_module.inference_setup(EvalConfig(), CPU)
    (record,) = [r for r in caplog.records if r.getMessage().startswith("inference:")]
    assert record.levelno == level


@pytest.mark.parametrize("caps, hint", [(NATIVE_CPU, True), (AVX2_CPU, False)], ids=["native", "avx2"])
def test_float32_by_default_with_the_faster_choice_named_where_there_is_one(monkeypatch, caplog, caps, hint):
    monkeypatch.setattr(inference_setup_module, "_LOGGED", set())
    monkeypatch.setattr(inference_setup_module, "probe_capabilities", lambda device: caps)
    with caplog.at_level(logging.INFO, logger="simplepose.evaluate"):
        setup = inference_setup_module.inference_setup(EvalConfig(), CPU)
    assert (setup.precision.dtype, setup.channels_last) == (None, False)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("inference:")]
    assert line.startswith("inference: float32, NCHW (eval.amp=off")
    assert ("eval.amp=auto (or --fast, evaluate.FAST) would run bf16 here, faster" in line) is hint


@pytest.mark.parametrize("caps, dtype", [(NATIVE_CPU, torch.bfloat16), (AVX2_CPU, None)], ids=["native", "avx2"])
def test_the_estimators_forward_runs_as_chosen(monkeypatch, caps, dtype):
    monkeypatch.setattr(inference_setup_module, "probe_capabilities", lambda device: caps)
    model = tiny_model().eval()
    PoseEstimator.from_model(model, EvalConfig(amp="auto", scales=[1.0], boxsize=64), CPU)
    first_conv = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    assert first_conv.weight.is_contiguous()  # the caller's model is left as it is: the fold made a copy

    seen = []  # without the fold the estimator runs the model itself (converted in place), so it can be watched
    first_conv.register_forward_pre_hook(lambda module, inputs: seen.append(
        (inputs[0].is_contiguous(memory_format=torch.channels_last), torch.is_autocast_enabled("cpu"),
         torch.get_autocast_dtype("cpu"))))  # fmt: skip
    estimator = PoseEstimator.from_model(
        model, EvalConfig(amp="auto", scales=[1.0], boxsize=64, fold_batchnorm=False), CPU
    )
    estimator(np.full((64, 96, 3), 128, np.uint8))
    channels_last = dtype is not None  # auto: channels_last in bf16, NCHW in float32
    assert first_conv.weight.is_contiguous(memory_format=torch.channels_last) is channels_last
    assert seen and all(cl for cl, _, _ in seen if channels_last)  # (the host batch is NHWC in memory either way)
    assert all(on == (dtype is not None) and (not on or got == dtype) for _, on, got in seen)


def trained_tiny_maps(ckpt, images, **settings) -> list[tuple[np.ndarray, tuple[float, float]]]:
    estimator = PoseEstimator.from_checkpoint(ckpt, device="cpu", **SMALL_EVAL, **settings)
    return [multiscale_maps(im, estimator.cfg, estimator.source, CPU, skeleton=COCO) for im in images]


def test_channels_last_gives_the_maps_and_people_of_nchw(trained_tiny_ckpt, synthetic_sample_images, one_thread):
    images = [cv2.imread(str(synthetic_sample_images / name)) for name in AGREEMENT_IMAGES]
    nchw = trained_tiny_maps(trained_tiny_ckpt, images, amp="off", channels_last="off")
    nhwc = trained_tiny_maps(trained_tiny_ckpt, images, amp="off", channels_last="on")
    decoder = EvalConfig(**SMALL_EVAL)
    agreements = []
    for (a, scale), (b, _) in zip(nchw, nhwc):
        assert np.abs(a - b).max() < 1e-4  # float32 rounding of other kernels (measured: ~1e-6)
        got, want = (keypoint_array(decode_people(m, decoder, scale, skeleton=COCO), 17) for m in (b, a))
        agreements.append(people_agreement(got, want, COCO.sigmas))
    assert_people_agree(agreements)


def test_bf16_maps_of_a_network_stay_within_bf16_rounding(trained_tiny_ckpt, synthetic_sample_images, one_thread):
    """The trained tiny network (a few convolutions deep) in bf16 autocast against float32: its maps move, by less
    than 3 % of their largest value (measured: about 1 %). Its people are not compared: this briefly trained model
    holds several times more candidate people than the images, with near ties (docs/testing.md#tests-and-their-data);
    the quick-start and paper models' people are compared by bench/test_time_precision.py
    (docs/benchmarks.md#inference-on-the-cpu)."""
    images = [cv2.imread(str(synthetic_sample_images / name)) for name in (LANDSCAPE, PORTRAIT)]
    float32 = trained_tiny_maps(trained_tiny_ckpt, images, amp="off", channels_last="off")
    bf16 = trained_tiny_maps(trained_tiny_ckpt, images, amp="bf16", channels_last="off")
    for (a, _), (b, _) in zip(float32, bf16):
        assert b.dtype == np.float32 and a.shape == b.shape
        difference = np.abs(a - b).max() / np.abs(a).max()
        assert 0 < difference < 0.03  # bf16 ran (the maps moved), and within its rounding


def test_decoding_finds_the_same_people_in_maps_rounded_to_bf16(synthetic_sample_annotations, synthetic_sample_images):
    """The annotated people of the synthetic sample, drawn as target maps (the oracle: clean peaks, as a trained
    network's) and decoded through multi-scale + flip, against the same maps rounded to bf16, as a bf16 network's last
    layer outputs them: the same people matched by OKS, keypoints within 1 px."""
    coco = pycocotools_coco(synthetic_sample_annotations)
    cfg = EvalConfig(**SMALL_EVAL)
    decoder = cfg
    agreements = []
    for image_id in sorted(coco.imgs)[:12]:
        image = cv2.imread(str(synthetic_sample_images / coco.imgs[image_id]["file_name"]))
        oracle = annotation_oracle(coco, TargetConfig(), COCO)

        def rounded(batch, oracle=oracle):
            return oracle(batch).to(torch.bfloat16).float()

        people = []
        for predict in (oracle, rounded):
            maps, scale = multiscale_maps(image, cfg, predict, CPU, skeleton=COCO, key=image_id)
            people.append(keypoint_array(decode_people(maps, decoder, scale, skeleton=COCO), 17))
        agreements.append(people_agreement(people[1], people[0], COCO.sigmas))
    assert_people_agree(agreements)
