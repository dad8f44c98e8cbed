"""Test-time forward: scale factors, padding, flip fusion, alignment of the averaged maps with the image."""

import numpy as np
import pytest
import torch

from simplepose.codec.decoder.decode import decode_people
from simplepose.codec.person import keypoint_array
from simplepose.config.schema import EvalConfig, TargetConfig
from simplepose.evaluate.inference.map_source import ImageMeta, InputBatch, network_source
from simplepose.evaluate.inference.multiscale import (
    fuse_flip,
    multiscale_maps,
    multiscale_maps_batch,
    prepare_input,
    resize_to_grid,
)
from simplepose.evaluate.inference.plan import InferencePlan, decode_grid, scale_factors
from simplepose.utils.precision import precision_for
from tests.helpers import COCO, COCO_LAYOUT, internal_to_dataset, keypoints_oracle, person, score_array

CPU = torch.device("cpu")


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


def test_an_input_batch_says_whether_it_holds_mirrors_and_is_checked():
    meta = ImageMeta(0, (8, 8), (8, 8), (8, 8))
    assert InputBatch(torch.zeros(2, 3, 8, 8), (meta,), flipped=True).flipped
    assert not InputBatch(torch.zeros(2, 3, 8, 8), (meta, meta), flipped=False).flipped  # two images, no mirrors
    with pytest.raises(ValueError, match="1 inputs for 1 images and their mirrors"):
        InputBatch(torch.zeros(1, 3, 8, 8), (meta,), flipped=True)


def test_fuse_flip_undoes_mirror_and_channel_swap():
    direct = torch.rand(50, 8, 12)
    mirrored = direct.flip(-1)[list(COCO_LAYOUT.flip)]  # what a perfect network says about the mirror
    plan = InferencePlan.of(COCO, EvalConfig())
    fused = fuse_flip(torch.stack([direct, direct * 2, mirrored, mirrored * 2]), plan.flip_index(direct.device))
    assert fused.shape == (2, 50, 8, 12)
    assert torch.allclose(fused[0], direct) and torch.allclose(fused[1], direct * 2)
    assert torch.equal(fuse_flip(direct[None], None)[0], direct)
    assert plan.flip_index(direct.device) is plan.flip_index(direct.device)  # made once per device


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


@pytest.mark.parametrize("decode_height", [0, 96])
def test_multiscale_flip_oracle_pipeline_recovers_a_person(decode_height):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (200, 300, 3), dtype=np.uint8)
    kp = person(0, 0)[None]
    kp[0, :, :2] = kp[0, :, :2] * 0.85 + (140.3, 5.7)
    cfg = EvalConfig(scales=[0.7, 1.0, 1.6], flip=True, boxsize=256, decode_height=decode_height)
    maps, scale = multiscale_maps(image, cfg, keypoints_oracle(kp, TargetConfig(), COCO), CPU, skeleton=COCO)
    assert maps.shape == (50, *decode_grid(200, 300, cfg)) and maps.dtype == np.float32
    people = decode_people(maps, cfg, scale, skeleton=COCO)
    assert len(people) == 1
    expected = np.zeros((17, 2))
    for i, c in enumerate(internal_to_dataset(COCO)):
        if c >= 0:
            expected[c] = kp[0, i, :2]
    assert np.abs(people[0].keypoints[:, :2] - expected).max() < 1.0


def test_a_batch_of_images_gives_the_same_maps_as_one_by_one():
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 255, (60, 90, 3), dtype=np.uint8) for _ in range(3)]
    weights = torch.linspace(0.5, 1.5, 50)

    def predict(batch):  # a "network" that depends on its input, position and channel
        batch = batch.pixels
        pooled = torch.nn.functional.avg_pool2d(batch.mean(1, keepdim=True), 4)
        return pooled * weights.view(1, 50, 1, 1) + torch.linspace(0, 1, pooled.shape[-1])

    cfg = EvalConfig(scales=[0.8, 1.2], boxsize=64, decode_height=40)
    together = multiscale_maps_batch(images, InferencePlan.of(COCO, cfg), predict, CPU)
    for image, (maps, scale) in zip(images, together):
        alone, alone_scale = multiscale_maps(image, cfg, predict, CPU, skeleton=COCO)
        assert scale == alone_scale and np.allclose(maps, alone, atol=1e-6)
    assert not np.allclose(together[0][0], together[1][0])


def test_network_source_uses_the_last_stack_finest_output():
    class TwoStacks(torch.nn.Module):
        def forward(self, x):
            b, _, h, w = x.shape
            fine = torch.full((b, 50, h // 4, w // 4), 0.5)
            return [[fine * 0, fine[..., ::2, ::2]], [fine, fine[..., ::2, ::2]]]

    image = np.zeros((64, 96, 3), np.uint8)
    for amp in ("off", "bf16"):
        predict = network_source(TwoStacks(), precision_for(amp, CPU, "eval.amp"))
        maps, scale = multiscale_maps(image, EvalConfig(scales=[1.0], boxsize=64), predict, CPU, skeleton=COCO)
        assert maps.dtype == np.float32 and np.allclose(maps, 0.5, atol=1e-5)


# how far "input_window" scores may move between decoding grids / image sizes (measured: 0.007 and 0.0003; the
# grid-pixel window moves by 0.19 and 0.003 between the image's size and 192 rows)
KEYPOINT_SCORE_TOLERANCE = 0.015
PERSON_SCORE_TOLERANCE = 0.001


def two_people_decoded(image_hw: tuple[int, int], decode_height: int, peak_score: str):
    """Two people drawn in proportion to a blank image of ``image_hw``, decoded from their oracle maps (3 scales
    + flip): (keypoint scores (2, 17), person scores (2,)), left person first."""
    f = image_hw[0] / 480
    kp = np.stack([person(0, 0), person(0, 0)])
    kp[0, :, :2] = kp[0, :, :2] * 1.5 * f + (180 * f, 60 * f)
    kp[1, :, :2] = kp[1, :, :2] * 1.2 * f + (430 * f, 150 * f)
    cfg = EvalConfig(scales=[0.5, 1.0, 2.0], decode_height=decode_height, peak_score=peak_score, min_parts=2)
    image = np.zeros((*image_hw, 3), np.uint8)
    maps, scale = multiscale_maps(image, cfg, keypoints_oracle(kp, TargetConfig(), COCO), CPU, skeleton=COCO)
    people = decode_people(maps, cfg, scale, skeleton=COCO)
    keypoints, scores = keypoint_array(people, COCO.num_dataset_keypoints), score_array(people)
    assert len(people) == 2 and (keypoints[:, :, 2] > 0).all()
    order = np.argsort(keypoints[:, 0, 0])
    return keypoints[order, :, 2], scores[order]


def test_input_window_scores_do_not_depend_on_the_decoding_grid_or_the_image_size():
    full = two_people_decoded((480, 640), 0, "input_window")
    for image_hw, decode_height in (((480, 640), 192), ((240, 320), 0)):
        other = two_people_decoded(image_hw, decode_height, "input_window")
        assert np.abs(other[0] - full[0]).max() < KEYPOINT_SCORE_TOLERANCE
        assert np.abs(other[1] - full[1]).max() < PERSON_SCORE_TOLERANCE
    assert 0.9 < full[0].mean() < 0.99  # the window's mean: most of the peak
    # the window of grid pixels covers more of each blob on a coarser grid: its scores fall
    mean_full, mean_192 = (two_people_decoded((480, 640), h, "window_mean")[0].mean() for h in (0, 192))
    assert mean_full - mean_192 > 0.1
