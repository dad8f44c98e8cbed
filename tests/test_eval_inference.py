"""Test-time forward: scale factors, padding, flip fusion, alignment of the averaged maps with the image."""

import dataclasses

import numpy as np
import pytest
import torch

from config import skeleton as sk
from config.loader import load_config
from config.schema import EvalConfig, TargetConfig
from evaluate import inference
from evaluate.decode import decode_people
from evaluate.inference import (
    decode_grid,
    fuse_flip,
    input_sizes,
    model_predictor,
    multiscale_maps,
    multiscale_maps_batch,
    prepare_input,
    resize_to_grid,
    scale_factors,
    uses_torch_resize,
)
from evaluate.oracle import oracle_predictor
from tests.test_eval_decode import person
from utils.paths import REPO_ROOT

CPU = torch.device("cpu")
PAPER_EVAL = load_config(REPO_ROOT / "config" / "simplepose_coco.yaml").eval  # 5 scales, 192-row grid
# (height, width) whose torch resize by scale_factor= came out a row or column short of the grid at one of
# the paper's scales: all such sizes with 64..700 rows at 640 columns, or 64..700 columns at 640 rows
SHORT_BY_FLOOR = [(99, 640), (123, 640), (129, 640), (198, 640), (245, 640), (246, 640), (248, 640), (252, 640),
                  (253, 640), (258, 640), (274, 640), (492, 640), (522, 640), (527, 640), (548, 640), (557, 640),
                  (640, 185), (640, 205), (640, 545), (640, 605), (666, 640), (677, 640)]  # fmt: skip
# torch and OpenCV compute bicubic in float32 differently (source coordinates rounded to float32 at up to ~950
# cells, ~6e-5 cell; weights rounded apart): 1.1e-4 at most on maps uniform in [0, 1) over the sweep below and
# over every size 64..700 (CPU kernel, and CUDA's on an H200). A map shifted by 1/100 cell differs by ~1e-2;
# F.interpolate(size=) differs by 0.74, CUDA's kernel left to copy an equal-size output by 0.58.
BACKENDS_ATOL = 5e-4


def test_scale_factors_relative_to_boxsize_and_capped():
    cfg = EvalConfig(scales=[0.5, 1.0, 20.0])
    m = scale_factors(427, 640, cfg)
    assert m[:2] == pytest.approx([256 / 427, 512 / 427])
    assert m[2] == pytest.approx(min(2600 / 427, 3800 / 640))


def test_prepare_input_pads_bottom_right_to_max_downsample():
    image = np.full((100, 150, 3), 255, np.uint8)
    padded, (hr, wr) = prepare_input(image, 1.3, EvalConfig())
    assert (hr, wr) == (130, 195) and padded.shape == (192, 256, 3) and padded.dtype == np.float32
    assert padded[:130, :195].min() == pytest.approx(1.0)
    assert np.allclose(padded[130:], 128 / 255) and np.allclose(padded[:, 195:], 128 / 255)


def test_fuse_flip_undoes_mirror_and_channel_swap():
    direct = torch.rand(50, 8, 12)
    mirrored = direct.flip(-1)[list(sk.CHANNEL_FLIP)]  # what a perfect network says about the mirror
    fused = fuse_flip(torch.stack([direct, direct * 2, mirrored, mirrored * 2]))
    assert fused.shape == (2, 50, 8, 12)
    assert torch.allclose(fused[0], direct) and torch.allclose(fused[1], direct * 2)
    assert torch.equal(fuse_flip(direct[None], flip=False)[0], direct)


@pytest.mark.parametrize("grid", [(50, 75), (100, 150), (25, 38), (40, 60)])
def test_resize_to_grid_keeps_the_image_extent_aligned(grid):
    # a Gaussian bump at input pixel x0 on the stride-4 output of a 100 x 150 resized image (padded to 160
    # x 256): after cropping the padding and resizing, its peak must sit at x0 in the grid's own coordinates
    hr, wr, stride, x0 = 100, 150, 4, 77.3
    centres = torch.arange(64, dtype=torch.float64) * stride + 1.5
    row = torch.exp(-((centres - x0) ** 2) / (2 * 9.0**2)).float()
    fused = row.expand(1, 2, 40, 64).clone()
    out = resize_to_grid(fused, (hr, wr), grid, stride)[0]
    assert out.shape == (*grid, 2)
    on_torch = resize_to_grid(fused, (hr, wr), grid, stride, backend="torch")[0]  # the GPU path
    assert np.abs(on_torch.permute(1, 2, 0).numpy() - out).max() < 2e-3
    values = np.log(np.maximum(out[grid[0] // 2, :, 0], 1e-6).astype(np.float64))
    j = int(np.argmax(values))
    vertex = j + 0.5 * (values[j - 1] - values[j + 1]) / (values[j - 1] - 2 * values[j] + values[j + 1])
    assert (vertex + 0.5) * wr / grid[1] - 0.5 == pytest.approx(x0, abs=0.3)  # bicubic ripple: ~0.2


def test_torch_resize_fills_the_grid_for_a_640x198_image():
    # at scale 3 (capped at 3800 columns) the 1176 resized rows are 294 cells; 294 * 192 / 294 came out as
    # 191.99999, and F.interpolate(scale_factor=) floored it to 191 rows: adding the scales failed
    h, w, stride = 198, 640, 4
    grid = decode_grid(h, w, PAPER_EVAL)
    image = np.zeros((h, w, 3), np.uint8)
    for m in scale_factors(h, w, PAPER_EVAL):
        padded, valid = prepare_input(image, m, PAPER_EVAL)
        fused = torch.rand(1, 2, padded.shape[0] // stride, padded.shape[1] // stride)
        out = resize_to_grid(fused, valid, grid, stride, backend="torch")
        assert out.shape == (1, 2, *grid), (m, valid)
        on_opencv = resize_to_grid(fused, valid, grid, stride, backend="opencv")
        assert np.abs(out.permute(0, 2, 3, 1).numpy() - on_opencv).max() < BACKENDS_ATOL


def cuda_rule_bicubic(counts):
    """``inference.bicubic_resize`` as CUDA's kernel behaves (it copies the input when the output has its size,
    whatever the factors; the CPU kernel resamples), counting the calls and those one row off the input."""
    real = inference.bicubic_resize

    def resize(x, size, factors):
        counts["resized"] += 1
        counts["one_row_more"] += tuple(size) == (x.shape[2] + 1, x.shape[3])
        return x.clone() if tuple(size) == tuple(x.shape[2:]) else real(x, size, factors)

    return resize


def test_torch_and_opencv_resize_agree_on_the_grid_over_image_sizes(monkeypatch):
    counts = {"resized": 0, "one_row_more": 0, "cubic_resample": 0}
    monkeypatch.setattr(inference, "bicubic_resize", cuda_rule_bicubic(counts))
    real_cubic_resample = inference._cubic_resample

    def cubic_resample(*args):  # OpenCV's path where cv2.resize would copy instead of resampling
        counts["cubic_resample"] += 1
        return real_cubic_resample(*args)

    monkeypatch.setattr(inference, "_cubic_resample", cubic_resample)
    sizes = [(h, 640) for h in range(64, 701, 4)] + [(640, w) for w in range(64, 701, 4)] + SHORT_BY_FLOOR
    rng = torch.Generator().manual_seed(0)
    stride, cases, worst = 4, 0, 0.0
    for h, w in sizes:
        grid = decode_grid(h, w, PAPER_EVAL)
        for m in scale_factors(h, w, PAPER_EVAL):
            valid, (hp, wp) = input_sizes(h, w, m, PAPER_EVAL)
            fused = torch.rand(1, 1, hp // stride, wp // stride, generator=rng)
            on_torch = resize_to_grid(fused, valid, grid, stride, backend="torch")
            on_opencv = resize_to_grid(fused, valid, grid, stride, backend="opencv")
            assert on_torch.shape == (1, 1, *grid) and on_opencv.shape == (1, *grid, 1), (h, w, m)
            worst = max(worst, float(np.abs(on_torch.permute(0, 2, 3, 1).numpy() - on_opencv).max()))
            cases += 1
    assert worst < BACKENDS_ATOL, worst
    # the sweep reaches every branch: plain resizes, the grid's own size (no resize), the extra row that keeps
    # CUDA's kernel resampling, and OpenCV's copy replaced by _cubic_resample
    assert counts["resized"] < cases and counts["one_row_more"] > 0 and counts["cubic_resample"] > 0, counts


def test_resize_backend_choice_by_config_and_device():
    assert not uses_torch_resize("auto", CPU) and uses_torch_resize("auto", torch.device("cuda"))
    assert uses_torch_resize("torch", CPU) and not uses_torch_resize("opencv", torch.device("cuda"))
    with pytest.raises(ValueError, match="resize backend"):
        uses_torch_resize("gpu", CPU)
    assert load_config(None, ["eval.resize_backend=torch"]).eval.resize_backend == "torch"


def test_eval_resize_backend_reaches_the_resize_and_both_give_the_same_maps(monkeypatch):
    backends = []
    real = inference.resize_to_grid

    def spy(fused, valid_hw, grid_hw, stride, backend="auto"):
        backends.append(backend)
        return real(fused, valid_hw, grid_hw, stride, backend)

    monkeypatch.setattr(inference, "resize_to_grid", spy)
    image = np.random.default_rng(2).integers(0, 255, (198, 640, 3), dtype=np.uint8)
    weights = torch.linspace(0.5, 1.5, 50)

    def predict(batch, resize_xy):  # a "network" that depends on its input, position and channel
        pooled = torch.nn.functional.avg_pool2d(batch.mean(1, keepdim=True), 4)
        return pooled * weights.view(1, 50, 1, 1) + torch.linspace(0, 1, pooled.shape[-1])

    maps = {}
    for backend in ("opencv", "torch"):
        cfg = dataclasses.replace(PAPER_EVAL, resize_backend=backend)
        maps[backend], scale = multiscale_maps(image, cfg, predict, CPU)
        assert maps[backend].shape == (50, *decode_grid(198, 640, cfg)) and maps[backend].dtype == np.float32
    assert backends == ["opencv"] * 5 + ["torch"] * 5
    assert np.abs(maps["torch"] - maps["opencv"]).max() < BACKENDS_ATOL


@pytest.mark.parametrize("decode_height", [0, 96])
def test_multiscale_flip_oracle_pipeline_recovers_a_person(decode_height):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (200, 300, 3), dtype=np.uint8)
    kp = person(0, 0)[None]
    kp[0, :, :2] = kp[0, :, :2] * 0.85 + (140.3, 5.7)
    cfg = EvalConfig(scales=[0.7, 1.0, 1.6], flip=True, boxsize=256, decode_height=decode_height)
    maps, scale = multiscale_maps(image, cfg, oracle_predictor(kp, TargetConfig()), CPU)
    assert maps.shape == (50, *decode_grid(200, 300, cfg)) and maps.dtype == np.float32
    people = decode_people(maps, cfg, scale)
    assert len(people) == 1
    expected = np.zeros((17, 2))
    for i, c in enumerate(sk.INTERNAL_TO_COCO):
        if c >= 0:
            expected[c] = kp[0, i, :2]
    assert np.abs(people.keypoints[0, :, :2] - expected).max() < 1.0


def test_a_batch_of_images_gives_the_same_maps_as_one_by_one():
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 255, (60, 90, 3), dtype=np.uint8) for _ in range(3)]
    weights = torch.linspace(0.5, 1.5, 50)

    def predict(batch, resize_xy):  # a "network" that depends on its input, position and channel
        pooled = torch.nn.functional.avg_pool2d(batch.mean(1, keepdim=True), 4)
        return pooled * weights.view(1, 50, 1, 1) + torch.linspace(0, 1, pooled.shape[-1])

    cfg = EvalConfig(scales=[0.8, 1.2], boxsize=64, decode_height=40)
    together = multiscale_maps_batch(images, cfg, predict, CPU)
    for image, (maps, scale) in zip(images, together):
        alone, alone_scale = multiscale_maps(image, cfg, predict, CPU)
        assert scale == alone_scale and np.allclose(maps, alone, atol=1e-6)
    assert not np.allclose(together[0][0], together[1][0])


def test_model_predictor_uses_the_last_stack_finest_output():
    class TwoStacks(torch.nn.Module):
        def forward(self, x):
            b, _, h, w = x.shape
            fine = torch.full((b, 50, h // 4, w // 4), 0.5)
            return [[fine * 0, fine[..., ::2, ::2]], [fine, fine[..., ::2, ::2]]]

    image = np.zeros((64, 96, 3), np.uint8)
    for amp in ("off", "bf16"):
        predict = model_predictor(TwoStacks(), amp)
        maps, scale = multiscale_maps(image, EvalConfig(scales=[1.0], boxsize=64), predict, CPU)
        assert maps.dtype == np.float32 and np.allclose(maps, 0.5, atol=1e-5)
