import pytest
import torch

from simplepose.codec.network_input import InputShapeError
from simplepose.config.config_file import ConfigError, load_config
from simplepose.config.schema import Config, ModelConfig
from simplepose.models import PoseNet, build_model
from simplepose.models.posenet import output_shapes
from simplepose.models.summary import macs_and_shapes, meta_model, parameter_counts
from tests.helpers import COCO
from tests.paths import REPO_ROOT

TINY = ModelConfig(stacks=2, inp_dim=16, increase=8, num_scales=5, head_channels=16, se_reduction=4)


def tiny(**changes) -> PoseNet:
    torch.manual_seed(0)
    return PoseNet(ModelConfig(**{**TINY.__dict__, **changes}), COCO)


def test_paper_preset_has_the_original_parameter_count_per_part():
    model = meta_model(load_config(REPO_ROOT / "config" / "simplepose_coco.yaml").model, COCO)
    assert parameter_counts(model) == {
        "stem": 1_007_680,
        "hourglasses": 89_774_080,
        "features": 35_579_200,
        "outs": 257_000,
        "merges": 2_380_800,
        "total": 128_998_760,
    }
    bn_floats = sum(b.numel() for name, b in model.named_buffers() if "num_batches_tracked" not in name)
    assert bn_floats == 207_744


def test_without_bn_only_conv_blocks_lose_batchnorm_as_in_the_original():
    assert parameter_counts(meta_model(ModelConfig(bn=False), COCO))["total"] == 128_965_992


def test_paper_architecture_output_shapes_and_cost_at_512():
    macs, shapes = macs_and_shapes(ModelConfig(), 512, 512, COCO)
    assert shapes == [(1, 50, 128, 128), (1, 50, 64, 64), (1, 50, 32, 32), (1, 50, 16, 16), (1, 50, 8, 8)]
    assert 260e9 < macs < 270e9  # docs/network.md#shapes-and-size: ~265 G with the scale-0 merges computed once


def test_paper_architecture_runs_on_a_small_input():
    torch.manual_seed(0)
    model = build_model(Config()).eval()
    with torch.no_grad():
        outputs = model(torch.rand(1, 3, 64, 64))
    assert len(outputs) == 4
    assert [tuple(y.shape) for y in outputs[-1]] == [(1, 50, 16 // 2**k, 16 // 2**k) for k in range(5)]
    assert all(torch.isfinite(y).all() for ys in outputs for y in ys)


@pytest.mark.parametrize("height, width", [(64, 64), (128, 128), (64, 192), (256, 128)])
def test_output_shapes_follow_the_input(height, width):
    model = tiny().eval()
    with torch.no_grad():
        outputs = model(torch.rand(2, 3, height, width))
    assert len(outputs) == 2
    for ys in outputs:
        assert [tuple(y.shape) for y in ys] == output_shapes(TINY, 2, height, width, COCO)
        assert [tuple(y.shape) for y in ys] == [(2, 50, height // 4 // 2**k, width // 4 // 2**k) for k in range(5)]


def test_fewer_scales_give_fewer_outputs():
    with torch.no_grad():
        outputs = tiny(num_scales=2, stacks=3).eval()(torch.rand(1, 3, 64, 64))
    assert [[tuple(y.shape) for y in ys] for ys in outputs] == [[(1, 50, 16, 16), (1, 50, 8, 8)]] * 3


@pytest.mark.parametrize("shape", [(1, 3, 500, 512), (1, 3, 512, 96), (1, 3, 32, 32), (1, 4, 64, 64), (3, 64, 64)])
def test_bad_input_sizes_say_which_sizes_work(shape):
    with pytest.raises(InputShapeError) as e:
        tiny()(torch.rand(*shape))
    assert e.value.shape == shape


def test_bad_model_config_is_a_user_error():
    with pytest.raises(ConfigError) as e:
        PoseNet(ModelConfig(inp_dim=30), COCO)
    assert e.value.key == "model.inp_dim"


def test_stem_honours_inp_dim():
    model = tiny(inp_dim=32)
    assert model.stem(torch.rand(1, 3, 64, 64)).shape == (1, 32, 16, 16)


def test_original_initialisation():
    model = build_model(load_config(REPO_ROOT / "config" / "quickstart.yaml"))
    w = torch.cat([m.weight.flatten() for m in model.modules() if isinstance(m, torch.nn.Conv2d)])
    assert abs(w.std().item() - 0.001) < 1e-4
    fc = torch.cat([m.weight.flatten() for m in model.modules() if isinstance(m, torch.nn.Linear)])
    assert abs(fc.std().item() - 0.01) < 2e-3
    biases = [m.bias for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    assert all((b == 0).all() for b in biases if b is not None)


def test_every_parameter_gets_a_gradient_so_ddp_needs_no_unused_parameter_search():
    model = tiny().train()
    outputs = model(torch.rand(2, 3, 64, 64))
    sum(y.sum() for ys in outputs for y in ys).backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []
    assert not any(n.startswith("merges.1.") for n, _ in model.named_parameters())  # last stack: no merges


def test_merges_run_once_per_step():
    model = tiny().train()
    model(torch.rand(2, 3, 64, 64))
    counters = [b.item() for n, b in model.named_buffers() if n.startswith("merges.") and "num_batches" in n]
    assert counters and set(counters) == {1}


def test_channels_last_gives_the_same_outputs():
    model = tiny().eval()
    x = torch.rand(2, 3, 64, 128)
    with torch.no_grad():
        ref = model(x)
        model = model.to(memory_format=torch.channels_last)
        out = model(x.contiguous(memory_format=torch.channels_last))
    for a, b in zip(ref[-1], out[-1]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)


def test_bf16_autocast_forward_and_backward():
    model = tiny().train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outputs = model(torch.rand(2, 3, 64, 64))
    assert outputs[-1][0].dtype == torch.bfloat16
    sum(y.float().sum() for ys in outputs for y in ys).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_summary_command_prints_counts_shapes_and_cost(capsys):
    from simplepose.models.__main__ import main

    assert main(["--config", str(REPO_ROOT / "config" / "simplepose_coco.yaml")]) == 0
    out = capsys.readouterr().out
    assert "128,998,760" in out and "(B, 50, 128, 128)" in out and "264.69 G multiply-accumulates" in out
