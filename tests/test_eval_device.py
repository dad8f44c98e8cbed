"""Evaluation's device path on the CPU: BatchNorm folded into the convolutions, the last stack's unread heads
skipped, inputs prepared with torch (as on a GPU) and padded to shape buckets: the same network outputs, inputs and
COCO results as the host path of OpenCV and NumPy."""

from __future__ import annotations

import json
import logging

import cv2
import numpy as np
import pytest
import torch

from simplepose.config.config_file import load_config, with_overrides
from simplepose.evaluate.evaluation import evaluate_model
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.evaluate.inference.multiscale import (
    bucket_size,
    input_sizes,
    make_batch,
    prepare_input,
    prepare_on_device,
    upload_images,
)
from simplepose.evaluate.inference.plan import scale_factors
from simplepose.models import build_model
from simplepose.models.fold import FoldError, fold_batchnorm
from tests.helpers import tiny_model_cfg
from tests.paths import PAPER_PRESET

pytestmark = pytest.mark.usefixtures("one_thread")
log = logging.getLogger(__name__)


def with_batchnorm_statistics(model: torch.nn.Module, x: torch.Tensor, seed: int = 0) -> torch.nn.Module:
    """``model`` in eval mode with the running statistics of one batch ``x`` and random affine parameters (the
    initial 0/1 statistics would make folding nearly the identity)."""
    g = torch.Generator().manual_seed(seed)
    batchnorms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in batchnorms:
        m.momentum = 1.0  # the running statistics become this batch's
        m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
        m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    with torch.no_grad():
        model.train()(x)
    for m in batchnorms:
        m.momentum = 0.1
    return model.eval()


def assert_outputs_close(want, got, atol: float, relative: bool = False) -> None:
    """Every output within ``atol`` (times the output's largest magnitude when ``relative``)."""
    for stack_a, stack_b in zip(want, got, strict=True):
        for a, b in zip(stack_a, stack_b, strict=True):
            torch.testing.assert_close(b, a, rtol=0, atol=atol * (a.abs().max().item() if relative else 1.0))


@pytest.mark.parametrize("preset", ["tiny", "paper"])
def test_the_folded_inference_model_equals_the_training_model(preset):
    """In float64, with statistics of a batch: equal to 1e-9 of each output's magnitude (an untrained network's
    BatchNorms scale by ~300, so in float32 its outputs move by 1e-4 for an input moved by 1e-7; a trained network
    is compared below)."""
    cfg = load_config(PAPER_PRESET, ["data.input_size=64"]) if preset == "paper" else tiny_model_cfg()
    torch.manual_seed(0)
    shape = (2, 3, 64, 64) if preset == "paper" else (2, 3, 64, 128)
    x = torch.rand(shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    model = with_batchnorm_statistics(build_model(cfg).double(), x.flip(-1))
    folded = fold_batchnorm(model)
    batchnorms = sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    assert folded.folded_batchnorms == batchnorms > 0 and folded.left_batchnorms == ()  # every one, none left
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    with torch.no_grad():
        want = model(x)
        got = folded(x)
        finest = folded.finest_prediction(x)
        assert torch.equal(model.finest_prediction(x), want[-1][0])  # the skipped heads change nothing
    assert max(o.abs().max().item() for stack in want for o in stack) > 1e-3  # outputs that are not all ~0
    assert_outputs_close(want, got, 1e-9, relative=True)
    assert_outputs_close([[want[-1][0]]], [[finest]], 1e-9, relative=True)
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())  # the training model untouched


class ReluBetween(torch.nn.Module):
    """conv -> ReLU -> BN under the names a folding by name would pair."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(torch.relu(self.conv(x)))


class OutputUsedTwice(torch.nn.Module):
    """conv -> BN, plus the conv's own output added to the result: folding would change that second use."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.conv1(x)
        return self.bn1(y) + y


class Untraceable(torch.nn.Module):
    """conv -> BN behind a branch on the data, which torch.fx cannot trace."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x)) if x.sum() > 0 else x


@pytest.mark.parametrize("module, folded_count", [
    (ReluBetween, 0), (OutputUsedTwice, 0), (Untraceable, 0),
    (lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()), 1),
], ids=["conv-relu-bn", "conv-output-used-twice", "untraceable", "sequential-conv-bn"])  # fmt: skip
def test_folding_follows_the_graph_not_the_names(module, folded_count):
    """Only a BatchNorm that takes a convolution's output directly, and alone, is folded (whatever the attributes
    are called); the others are left, and the copy computes what the model computes."""
    torch.manual_seed(0)
    x = torch.rand(2, 3, 12, 12, dtype=torch.float64)
    model = with_batchnorm_statistics(module().double(), x.flip(-1))
    folded = fold_batchnorm(model)
    batchnorms = sum(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    assert folded.folded_batchnorms == folded_count and batchnorms == 1 - folded_count
    assert len(folded.left_batchnorms) == 1 - folded_count
    with torch.no_grad():
        want = model(x)
        torch.testing.assert_close(folded(x), want, rtol=0, atol=1e-9 * want.abs().max().item())


def test_a_batchnorm_without_running_statistics_is_refused_clearly():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4, track_running_stats=False))
    with pytest.raises(FoldError, match=r"BatchNorm '1' has no running statistics .* eval.fold_batchnorm=false") as e:
        fold_batchnorm(model)
    assert e.value.key == "eval.fold_batchnorm"


def test_the_folded_trained_model_equals_it_in_float32(trained_tiny_ckpt):
    model, _ = load_model(str(trained_tiny_ckpt), None, None, torch.device("cpu"))
    x = torch.rand(2, 3, 128, 192, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want, got = model(x), fold_batchnorm(model)(x)
    assert max(o.abs().max().item() for stack in want for o in stack) > 0.1
    assert_outputs_close(want, got, 1e-5)


def test_device_preprocessing_matches_opencv_within_one_grey_level(synthetic_sample_images):
    cfg = load_config(None, []).eval
    image = cv2.imread(str(sorted(synthetic_sample_images.glob("*.jpg"))[0]))
    h, w = image.shape[:2]
    uploaded = upload_images([image], torch.device("cpu"))
    for m in scale_factors(h, w, cfg):  # 0.5 .. 3: down and up
        resized, padded = input_sizes(h, w, m, cfg)
        bucket = (bucket_size(padded[0], 64), bucket_size(padded[1], 64))
        host = make_batch([prepare_input(image, m, cfg, bucket)[0]], cfg.flip, torch.device("cpu"))
        device = prepare_on_device(uploaded, resized, bucket, cfg)
        assert device.shape == host.shape == (2, 3, *bucket)
        diff = (device - host).abs() * 255
        assert diff.max() <= 1.0 + 1e-3, m  # OpenCV's fixed-point bicubic rounds a few pixels the other way
        assert (diff > 0.5).float().mean() < 0.05, m
        assert torch.equal(device[:, :, resized[0] :], host[:, :, resized[0] :])  # the padding


def test_shape_buckets_are_few_and_waste_at_most_an_eighth():
    sizes = range(64, 4097, 64)
    buckets = {bucket_size(n, 64) for n in sizes}
    assert len(buckets) <= len(sizes) / 2
    assert all(n <= bucket_size(n, 64) <= n * 9 / 8 + 1e-9 and bucket_size(n, 64) % 64 == 0 for n in sizes)
    assert [bucket_size(n, 64) for n in (64, 512, 576, 1088, 2048)] == [64, 512, 576, 1152, 2048]


def results(model, cfg, images, annotations, out):
    stats, _ = evaluate_model(model, images, annotations, cfg, torch.device("cpu"), out, progress=False)
    return stats, json.loads(out.read_text())


def test_bucketed_device_side_evaluation_gives_the_host_paths_results(trained_tiny_ckpt, sample_images,
                                                                      sample_annotations, tmp_path):  # fmt: skip
    """Today's path (OpenCV on the host, inputs padded to multiples of 64, the network as trained) against the
    device path (torch, shape buckets, BatchNorm folded): AP equal to 3 decimals; the files may differ in the last
    digits of a few coordinates and scores (inputs one grey level apart, float rounding of the folded weights)."""
    model, cfg = load_model(str(trained_tiny_ckpt), None, ["eval.scales=[1.0,2.0]"], torch.device("cpu"))
    host_cfg = with_overrides(cfg, {"eval.preprocess": "host", "eval.shape_buckets": "off",
                                    "eval.fold_batchnorm": False}, "test")  # fmt: skip
    device_cfg = with_overrides(cfg, {"eval.preprocess": "device", "eval.shape_buckets": "on"}, "test")
    host_stats, host = results(model, host_cfg, sample_images, sample_annotations, tmp_path / "host.json")
    device_stats, device = results(model, device_cfg, sample_images, sample_annotations, tmp_path / "device.json")
    assert round(host_stats["AP"], 3) == round(device_stats["AP"], 3)
    assert round(host_stats["AR"], 3) == round(device_stats["AR"], 3)
    assert len(host) > 20 and abs(len(host) - len(device)) <= max(1, len(host) // 50)  # a borderline person or so
    offsets = matched_offsets(host, device)
    assert len(offsets) > 100 and np.mean(offsets < 0.1) > 0.9  # the same people, to a tenth of a pixel
    same_bytes = (tmp_path / "host.json").read_bytes() == (tmp_path / "device.json").read_bytes()
    print(
        f"AP host {host_stats['AP']:.4f} device {device_stats['AP']:.4f}; {len(host)} and {len(device)} people; "
        f"files {'identical' if same_bytes else 'differ'}; keypoints within 0.1 px: {np.mean(offsets < 0.1):.3f}, "
        f"median offset {np.median(offsets):.4f} px"
    )


def matched_offsets(a: list[dict], b: list[dict]) -> np.ndarray:
    """Pixel offsets of the keypoints both found, each person of ``a`` paired with the nearest person of ``b`` in
    its image (mean offset over shared keypoints)."""
    by_image: dict[int, list[np.ndarray]] = {}
    for r in b:
        by_image.setdefault(r["image_id"], []).append(np.reshape(r["keypoints"], (-1, 3)))
    offsets = []
    for r in a:
        kp = np.reshape(r["keypoints"], (-1, 3))
        best = None
        for other in by_image.get(r["image_id"], []):
            both = (kp[:, 2] > 0) & (other[:, 2] > 0)
            if both.any():
                d = np.linalg.norm(kp[both, :2] - other[both, :2], axis=1)
                if best is None or d.mean() < best.mean():
                    best = d
        if best is not None:
            offsets.extend(best)
    return np.array(offsets)


def test_asking_for_cuda_without_it_gives_each_commands_own_hint(tiny_ckpt, synthetic_sample_images, tmp_path,
                                                                monkeypatch, capsys):  # fmt: skip
    """``--device cuda`` (``device="cuda"``) where CUDA is missing: one error naming how this command asks for the
    CPU, before any work; training keeps ``train.device=cpu``."""
    from simplepose.evaluate import PoseEstimator, coco_eval, demo
    from simplepose.utils.distributed import select_device
    from simplepose.utils.errors import UserError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert select_device("auto") == torch.device("cpu")
    with pytest.raises(UserError, match="CUDA is not available; use train.device=cpu") as e:
        select_device("cuda")
    assert e.value.key == "device"
    with pytest.raises(UserError, match='CUDA is not available; use device="cpu"'):
        PoseEstimator.from_checkpoint(tiny_ckpt, device="cuda")
    out = tmp_path / "r.json"
    image = synthetic_sample_images / sorted(p.name for p in synthetic_sample_images.glob("*.jpg"))[0]
    assert demo.main(["--ckpt", str(tiny_ckpt), "--input", str(image), "--json", str(out), "--device", "cuda"]) == 2
    assert "CUDA is not available; use --device cpu" in capsys.readouterr().err
    argv = ["--ckpt", str(tiny_ckpt), "--images", str(synthetic_sample_images), "--out", str(out), "--device", "cuda:0"]
    assert coco_eval.main(argv) == 2
    assert "device 'cuda:0' requested but CUDA is not available; use --device cpu" in capsys.readouterr().err
    assert not out.exists()


def test_a_name_that_is_no_device_and_a_gpu_that_is_not_there_are_named(monkeypatch):
    from simplepose.utils.distributed import select_device
    from simplepose.utils.errors import UserError

    for name, said in (("gpu", "device 'gpu' is not a device: give auto, cpu, cuda or cuda:N (e.g. --device cpu)"),
                       ("mps", "device 'mps': this project runs on cpu or cuda")):  # fmt: skip
        with pytest.raises(UserError) as e:
            select_device(name, cpu_hint="--device cpu")
        assert str(e.value).startswith(said) and e.value.key == "device"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(UserError) as e:
        select_device("cuda:3", cpu_hint='device="cpu"')
    said = "'cuda:3' requested but this machine has 1 GPU(s) (cuda:0 to cuda:0); give one of those, or device=\"cpu\""
    assert said in str(e.value)
