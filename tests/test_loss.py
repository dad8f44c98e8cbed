import pytest
import torch

from simplepose.config.config_file import ConfigError
from simplepose.config.schema import Config, LossConfig
from simplepose.models import MultiTaskLoss
from simplepose.models.loss import build_loss
from simplepose.utils.errors import UserError
from tests.helpers import COCO


def one_pixel_case(dtype=torch.float32):
    """Batch of 2, one 1x1 scale, one stack; sample 0 holds four hand-picked channels, sample 1 is exact."""
    p = torch.zeros(2, 50, 1, 1, dtype=dtype)
    g = torch.zeros(2, 50, 1, 1, dtype=dtype)
    p[0, 0], g[0, 0] = 0.5, 1.0  # limb, positive: (0.5)^2 * |1 - 0.5| * 1 = 0.125
    p[0, 30], g[0, 30] = 0.2, 0.0  # keypoint, negative: (0.2)^2 * |0.2| * 3 = 0.024
    p[0, 48], g[0, 48] = 0.4, 0.9  # person mask, positive: (0.5)^2 * |0.6| * 0.1 = 0.015
    p[0, 49], g[0, 49] = -0.5, 0.005  # max keypoint, negative (g < 0.01): (0.505)^2 * |-0.5| = 0.1275125
    return p, g, torch.ones(2, 1, 1, 1, dtype=dtype)


def single(cfg: LossConfig | None = None, **kw) -> MultiTaskLoss:
    return MultiTaskLoss(cfg or LossConfig(stack_weights=[1.0], scale_weights=[1.0], **kw), COCO)


def test_hand_computed_value_and_breakdown():
    p, g, m = one_pixel_case()
    total, parts = single()([[p]], [g], [m])
    expected = {"limb": 0.125, "keypoint": 0.024, "person_mask": 0.015, "max_keypoint": 0.1275125}
    # divided by the actual batch size (2)
    assert total.item() == pytest.approx(sum(expected.values()) / 2, rel=1e-6)
    for name, value in expected.items():
        assert parts[name].item() == pytest.approx(value / 2, rel=1e-6)
    assert parts["stack"].shape == (1,) and parts["scale"].shape == (1,) and parts["stack_scale"].shape == (1, 1)
    assert all(isinstance(v, torch.Tensor) and not v.requires_grad for v in parts.values())


def test_gamma_raises_the_focal_factor_to_its_power():
    p, g, m = one_pixel_case()
    total, _ = single(gamma=2.0)([[p]], [g], [m])
    by_hand = 0.25 * 0.5**2 + 0.04 * 0.2**2 * 3 + 0.25 * 0.6**2 * 0.1 + 0.505**2 * 0.5**2
    assert total.item() == pytest.approx(by_hand / 2, rel=1e-6)


def test_alpha_and_beta_shift_the_focal_factor():
    p, g, m = one_pixel_case()
    total, _ = single(alpha=0.1, beta=0.2)([[p]], [g], [m])
    # positives |1 - (p - alpha)| = |1 - p + 0.1|; negatives |1 - (1 - p - beta)| = |p + 0.2|
    by_hand = 0.25 * 0.6 + 0.04 * 0.4 * 3 + 0.25 * 0.7 * 0.1 + 0.505**2 * 0.3
    assert total.item() == pytest.approx(by_hand / 2, rel=1e-6)


def test_positive_threshold_decides_the_factor():
    p, g, m = one_pixel_case()
    total, _ = single(pos_threshold=0.004)([[p]], [g], [m])  # channel 49 (g = 0.005) becomes positive
    assert total.item() == pytest.approx((0.125 + 0.024 + 0.015 + 0.505**2 * 1.5) / 2, rel=1e-6)


def test_stack_and_scale_weights_are_normalised_and_batch_divides():
    torch.manual_seed(0)
    shapes = [(3, 50, 4, 4), (3, 50, 2, 2)]
    outputs = [[torch.rand(s) for s in shapes] for _ in range(2)]
    targets = [torch.rand(s) for s in shapes]
    masks = [(torch.rand(s[0], 1, *s[2:]) > 0.3).float() for s in shapes]
    cfg = LossConfig(stack_weights=[1.0, 3.0], scale_weights=[2.0, 6.0])
    total, parts = MultiTaskLoss(cfg, COCO)(outputs, targets, masks)

    w = torch.ones(50)
    w[30:48], w[48] = 3.0, 0.1

    def plain(p, g, m):
        phi = torch.where(g >= 0.01, (1 - p).abs(), p.abs())
        return ((p - g) ** 2 * phi * m * w[:, None, None]).sum()

    by_hand = sum(
        st / 4 * sc / 8 * plain(outputs[t][k], targets[k], masks[k])
        for t, st in enumerate([1.0, 3.0])
        for k, sc in enumerate([2.0, 6.0])
    )
    torch.testing.assert_close(total, by_hand / 3)
    for key in ("stack", "scale"):
        torch.testing.assert_close(parts[key].sum(), total)
    groups = parts["limb"] + parts["keypoint"] + parts["person_mask"] + parts["max_keypoint"]
    torch.testing.assert_close(groups, total)

    configured_cfg = LossConfig(**{**cfg.__dict__, "batch_divisor": "configured"})
    configured = MultiTaskLoss(configured_cfg, COCO, configured_batch_size=4)
    torch.testing.assert_close(configured(outputs, targets, masks)[0], by_hand / 4)
    torch.testing.assert_close(MultiTaskLoss(cfg, COCO, reduction="sum")(outputs, targets, masks)[0], by_hand)


def test_masked_pixels_contribute_nothing():
    torch.manual_seed(1)
    p = torch.rand(1, 50, 3, 3, requires_grad=True)
    g = torch.rand(1, 50, 3, 3)
    m = torch.ones(1, 1, 3, 3)
    m[0, 0, 1, 2] = 0
    loss = single()
    total, _ = loss([[p]], [g], [m])
    total.backward()
    assert (p.grad[0, :, 1, 2] == 0).all() and (p.grad[0, :, 0, 0] != 0).any()
    changed = p.detach().clone()
    changed[0, :, 1, 2] = 100.0
    torch.testing.assert_close(loss([[changed]], [g], [m])[0], total.detach())


def test_gradcheck_in_double_precision():
    torch.manual_seed(2)
    p = (torch.rand(1, 50, 2, 2, dtype=torch.float64) * 0.8 + 0.1).requires_grad_()  # away from |.| kinks
    g = torch.rand(1, 50, 2, 2, dtype=torch.float64)
    g[g < 0.3] = 0.0
    m = torch.tensor([1.0, 0.0, 1.0, 0.6], dtype=torch.float64).reshape(1, 1, 2, 2)
    for gamma in (1.0, 2.0):
        loss = single(gamma=gamma)
        assert torch.autograd.gradcheck(lambda x, loss=loss: loss([[x]], [g], [m])[0], (p,))


def test_loss_is_float32_under_bf16_autocast():
    torch.manual_seed(3)
    conv = torch.nn.Conv2d(3, 50, 1)
    x = torch.rand(2, 3, 4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = conv(x)
        assert y.dtype == torch.bfloat16
        total, parts = single()([[y]], [torch.rand(2, 50, 4, 4)], [torch.ones(2, 1, 4, 4)])
    assert total.dtype == torch.float32 and parts["keypoint"].dtype == torch.float32
    total.backward()
    assert conv.weight.grad is not None and torch.isfinite(conv.weight.grad).all()


def test_mismatched_weights_or_shapes_are_user_errors():
    p, g, m = one_pixel_case()
    with pytest.raises(ConfigError) as e:
        MultiTaskLoss(LossConfig(), COCO)([[p]], [g], [m])
    assert e.value.key == "loss.stack_weights"  # 4 weights, one stack
    with pytest.raises(UserError) as e:
        single()([[p]], [g[:, :, :0]], [m])
    assert e.value.key == "data.input_size"


def test_build_loss_uses_the_configured_batch_size():
    cfg = Config()
    cfg.loss.batch_divisor = "configured"
    cfg.train.batch_size = 7
    loss = build_loss(cfg, reduction="mean")
    assert loss._divisor(2, "mean") == 7.0 and loss._divisor(2, "sum") == 1.0
    p, g, m = one_pixel_case()
    cfg.loss.stack_weights, cfg.loss.scale_weights = [1.0], [1.0]
    by_call = MultiTaskLoss(cfg, COCO)([[p]], [g], [m], reduction="sum")[0]
    torch.testing.assert_close(by_call, build_loss(cfg, reduction="sum")([[p]], [g], [m])[0])
    torch.testing.assert_close(by_call / 7, MultiTaskLoss(cfg, COCO)([[p]], [g], [m])[0])
