"""The two ways of resizing the fused maps onto the decoding grid (eval.resize_backend): OpenCV (the CPU's) and
torch (the GPU's, reached here on the CPU) give maps of the grid's exact size that agree, for every image size."""

import dataclasses

import numpy as np
import pytest
import torch

from simplepose.config.config_file import load_config
from simplepose.evaluate.inference import host_maps, multiscale
from simplepose.evaluate.inference.multiscale import (
    input_sizes,
    multiscale_maps,
    prepare_input,
    resize_to_grid,
    uses_torch_resize,
)
from simplepose.evaluate.inference.plan import decode_grid, scale_factors
from tests.helpers import COCO
from tests.paths import REPO_ROOT

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


def test_torch_resize_fills_the_grid_for_a_640x198_image():
    # at scale 3 (capped at 3800 columns) the 1176 resized rows are 294 cells; 294 x (192 * 4 / 1176) came out
    # as 191.99999, F.interpolate(scale_factor=) floored it to 191 rows, and adding the scales failed
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
    """``multiscale.bicubic_resize`` as CUDA's kernel behaves (it copies the input when the output has its size,
    whatever the factors; the CPU kernel resamples), counting the calls and those one row off the input."""
    real = multiscale.bicubic_resize

    def resize(x, size, factors):
        counts["resized"] += 1
        counts["one_row_more"] += tuple(size) == (x.shape[2] + 1, x.shape[3])
        return x.clone() if tuple(size) == tuple(x.shape[2:]) else real(x, size, factors)

    return resize


def test_torch_and_opencv_resize_agree_on_the_grid_over_image_sizes(monkeypatch):
    counts = {"resized": 0, "one_row_more": 0, "cubic_resample": 0}
    monkeypatch.setattr(multiscale, "bicubic_resize", cuda_rule_bicubic(counts))
    real_cubic_resample = host_maps._cubic_resample

    def cubic_resample(*args):  # OpenCV's path where cv2.resize would copy instead of resampling
        counts["cubic_resample"] += 1
        return real_cubic_resample(*args)

    monkeypatch.setattr(host_maps, "_cubic_resample", cubic_resample)
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
    real = multiscale.resize_to_grid

    def spy(fused, valid_hw, grid_hw, stride, backend="auto"):
        backends.append(backend)
        return real(fused, valid_hw, grid_hw, stride, backend)

    monkeypatch.setattr(multiscale, "resize_to_grid", spy)
    image = np.random.default_rng(2).integers(0, 255, (198, 640, 3), dtype=np.uint8)
    weights = torch.linspace(0.5, 1.5, 50)

    def predict(batch):  # a "network" that depends on its input, position and channel
        batch = batch.pixels
        pooled = torch.nn.functional.avg_pool2d(batch.mean(1, keepdim=True), 4)
        return pooled * weights.view(1, 50, 1, 1) + torch.linspace(0, 1, pooled.shape[-1])

    maps = {}
    for backend in ("opencv", "torch"):
        cfg = dataclasses.replace(PAPER_EVAL, resize_backend=backend)
        maps[backend], scale = multiscale_maps(image, cfg, predict, CPU, skeleton=COCO)
        assert maps[backend].shape == (50, *decode_grid(198, 640, cfg)) and maps[backend].dtype == np.float32
    assert backends == ["opencv"] * 5 + ["torch"] * 5
    assert np.abs(maps["torch"] - maps["opencv"]).max() < BACKENDS_ATOL
