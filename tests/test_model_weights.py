"""Loading weights, incl. the original's released checkpoint format (docs/network.md#weights-of-the-original).

The original key set is generated here from its naming rules and layer shapes
(docs/network.md#weights-of-the-original), independently of the mapping in models/weights.py.
"""

import pytest
import torch

from simplepose.checkpoint.format import Checkpoint, CheckpointError
from simplepose.checkpoint.original import main as convert_main
from simplepose.config.schema import ModelConfig
from simplepose.models import PoseNet, build_model
from simplepose.models.summary import meta_model
from simplepose.models.weights import WeightsMismatch, original_to_ours
from tests.helpers import COCO

TINY = ModelConfig(stacks=2, inp_dim=16, increase=8, num_scales=5, head_channels=16, se_reduction=4)


def original_state_dict(T=4, C=256, I=128, S=5, H=256, reduction=16, device="cpu"):  # noqa: N803
    """The key names and shapes of the original Network's state dict; every tensor filled with its own value."""
    state = {}

    def put(key, *shape):
        state["posenet." + key] = torch.full(shape, float(len(state) + 1), device=device)

    def bn(p, c):
        for name in ("weight", "bias", "running_mean", "running_var"):
            put(f"{p}.{name}", c)
        state[f"posenet.{p}.num_batches_tracked"] = torch.tensor(-len(state), device=device)

    def residual(p, cin, cout):
        mid = cout // 2
        put(f"{p}.convBlock.0.weight", mid, cin, 1, 1)
        bn(f"{p}.convBlock.1", mid)
        put(f"{p}.convBlock.3.weight", mid, mid, 3, 3)
        bn(f"{p}.convBlock.4", mid)
        put(f"{p}.convBlock.6.weight", cout, mid, 1, 1)
        bn(f"{p}.convBlock.7", cout)
        if cin != cout:
            put(f"{p}.skipConv.0.weight", cout, cin, 1, 1)
            bn(f"{p}.skipConv.1", cout)

    def cbr(p, cin, cout, k):
        put(f"{p}.conv.weight", cout, cin, k, k)
        bn(f"{p}.bn", cout)

    put("pre.conv1.weight", 64 * C // 256, 3, 7, 7)
    bn("pre.bn1", 64 * C // 256)
    residual("pre.res1", 64 * C // 256, C // 2)
    residual("pre.res2", C // 2, C // 2)
    for i in range(6):
        cbr(f"pre.dilation.{i}", C // 2, C // 2, 3)
    widths = [C + I * d for d in range(5)]
    for t in range(T):
        for d in range(4):
            c, c1 = widths[d], widths[d + 1]
            residual(f"hourglass.{t}.hg.{d}.0", c, c)
            residual(f"hourglass.{t}.hg.{d}.1", c, c1)
            residual(f"hourglass.{t}.hg.{d}.2", c1, c)
            cbr(f"hourglass.{t}.hg.{d}.3", c, c, 3)
            if d == 3:
                residual(f"hourglass.{t}.hg.{d}.4", c1, c1)
    for t in range(T):
        for k in range(S):
            p = f"features.{t}.before_regress.{k}"
            cbr(f"{p}.0", widths[k], H, 3)
            cbr(f"{p}.1", H, H, 3)
            put(f"{p}.2.fc.0.weight", H // reduction, H)
            put(f"{p}.2.fc.0.bias", H // reduction)
            put(f"{p}.2.fc.2.weight", H, H // reduction)
            put(f"{p}.2.fc.2.bias", H)
            put(f"outs.{t}.{k}.conv.weight", 50, H, 1, 1)
            put(f"outs.{t}.{k}.conv.bias", 50)
            if t < T - 1:
                for name, cin in (("merge_features", H), ("merge_preds", 50)):
                    put(f"{name}.{t}.{k}.conv.conv.weight", widths[k], cin, 1, 1)
                    bn(f"{name}.{t}.{k}.conv.bn", widths[k])
    return state


def tiny_original():
    return original_state_dict(T=2, C=16, I=8, S=5, H=16, reduction=4)


def test_the_paper_model_has_every_original_key_with_its_shape():
    original = original_state_dict(device="meta")
    # counted on the original's own model
    assert len(original) == 1848 and sum("num_batches_tracked" in k for k in original) == 288
    ours = meta_model(ModelConfig(), COCO).state_dict()
    mapped = {original_to_ours(k): tuple(v.shape) for k, v in original.items()}
    assert len(mapped) == len(original)
    assert mapped == {k: tuple(v.shape) for k, v in ours.items()}


def test_original_checkpoint_loads_strict_and_values_land_in_place():
    original = tiny_original()
    model = PoseNet(TINY, COCO)
    report = Checkpoint.from_dict({"weights": original, "epoch": 52, "train_loss": 19.0}).load_into(model, strict=True)
    assert report.ok and report.source == "original"
    o = lambda key: original["posenet." + key]  # noqa: E731
    pairs = [
        (model.stem.conv1.weight, o("pre.conv1.weight")),
        (model.stem.bn1.running_var, o("pre.bn1.running_var")),
        (model.stem.res1.conv2.weight, o("pre.res1.convBlock.3.weight")),
        (model.stem.res1.skip.bn.bias, o("pre.res1.skipConv.1.bias")),
        (model.stem.dilated[4].bn.weight, o("pre.dilation.4.bn.weight")),
        (model.hourglasses[1].levels[2].down.skip.bn.running_mean, o("hourglass.1.hg.2.1.skipConv.1.running_mean")),
        (model.hourglasses[0].levels[3].inner.bn3.weight, o("hourglass.0.hg.3.4.convBlock.7.weight")),
        (model.hourglasses[1].levels[0].up.conv3.weight, o("hourglass.1.hg.0.2.convBlock.6.weight")),
        (model.hourglasses[0].levels[1].refine.conv.weight, o("hourglass.0.hg.1.3.conv.weight")),
        (model.hourglasses[0].levels[1].skip.bn1.num_batches_tracked,
         o("hourglass.0.hg.1.0.convBlock.1.num_batches_tracked")),
        (model.heads[0][1].conv2.bn.bias, o("features.0.before_regress.1.1.bn.bias")),
        (model.heads[1][3].se.fc1.weight, o("features.1.before_regress.3.2.fc.0.weight")),
        (model.heads[1][4].se.fc2.bias, o("features.1.before_regress.4.2.fc.2.bias")),
        (model.heads[1][0].predict.bias, o("outs.1.0.conv.bias")),
        (model.merges[0][4].from_predictions.bn.weight, o("merge_preds.0.4.conv.bn.weight")),
        (model.merges[0][2].from_features.conv.weight, o("merge_features.0.2.conv.conv.weight")),
    ]  # fmt: skip
    for ours, theirs in pairs:
        assert torch.equal(ours, theirs)
    # every original tensor has its own fill value, so every one of them must appear exactly once
    loaded = sorted(v.flatten()[0].item() for v in model.state_dict().values())
    assert loaded == sorted(v.flatten()[0].item() for v in original.values())


def test_legacy_checkpoint_bare_and_wrapped_state_dicts_load(tmp_path):
    torch.manual_seed(0)
    source = PoseNet(TINY, COCO)
    state = source.state_dict()
    path = tmp_path / "last.pt"
    torch.save({"model": state, "config": {"model": dict(TINY.__dict__)}, "epoch": 3}, path)
    for given in (Checkpoint.load(path), Checkpoint.load(str(path)), Checkpoint.from_dict(state),
                  Checkpoint.from_dict({"module." + k: v for k, v in state.items()}),
                  Checkpoint.from_dict({"_orig_mod." + k: v for k, v in state.items()})):  # fmt: skip
        target = PoseNet(TINY, COCO)
        assert given.load_into(target).ok
        assert all(torch.equal(a, b) for a, b in zip(target.state_dict().values(), state.values()))


def test_architecture_mismatch_lists_keys_and_suggests_the_config():
    state = PoseNet(ModelConfig(**{**TINY.__dict__, "stacks": 3}), COCO).state_dict()
    with pytest.raises(WeightsMismatch) as e:
        Checkpoint.from_dict({"model": state}, "runs/x/last.pt").load_into(PoseNet(TINY, COCO))
    assert e.value.file == "runs/x/last.pt" and not e.value.report.missing
    assert any(k.startswith("hourglasses.2.") for k in e.value.report.unexpected)
    assert e.value.fits == {"model.stacks": 3, "loss.stack_weights": [1, 1, 1]}  # the overrides that fit it

    wider = PoseNet(ModelConfig(**{**TINY.__dict__, "head_channels": 32, "se_reduction": 8}), COCO).state_dict()
    with pytest.raises(WeightsMismatch) as e:
        Checkpoint.from_dict(wider).load_into(PoseNet(TINY, COCO))
    assert e.value.report.mismatched and e.value.fits == {"model.head_channels": 32, "model.se_reduction": 8}

    report = Checkpoint.from_dict({"model": state}).load_into(PoseNet(TINY, COCO), strict=False)
    assert report.unexpected and not report.missing and not report.mismatched


def test_file_errors_are_user_errors(tmp_path):
    model = PoseNet(TINY, COCO)
    path = tmp_path / "good.pt"
    torch.save({"model": model.state_dict()}, path)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    for bad in (tmp_path / "nope.pt", truncated):
        with pytest.raises(CheckpointError) as e:
            Checkpoint.load(bad)
        assert e.value.file == str(bad)
    with pytest.raises(CheckpointError) as e:
        Checkpoint.from_dict({"epoch": 1}, "x.pt")
    assert (e.value.file, e.value.key) == ("x.pt", "model")


class Payload:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_checkpoints_are_loaded_without_running_code(tmp_path, capsys):
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "x": Payload()}, path)
    capsys.readouterr()
    with pytest.raises(CheckpointError) as e:
        Checkpoint.load(path)
    assert e.value.file == str(path)
    assert "must never run" not in capsys.readouterr().out


def test_converter_writes_our_format_with_its_config(tmp_path):
    src, out = tmp_path / "PoseNet_52_epoch.pth", tmp_path / "converted.pt"
    original = tiny_original()
    torch.save({"weights": original, "optimizer_weight": {}, "train_loss": 19.0, "epoch": 52}, src)
    assert convert_main(["--weights", str(src), "--out", str(out)]) == 0
    ckpt = Checkpoint.load(out)
    cfg = ckpt.config
    assert cfg.model == TINY and cfg.loss.stack_weights == [1.0, 1.0]
    assert ckpt.skeleton == COCO and ckpt.origin == "original:PoseNet_52_epoch.pth" and ckpt.train_state is None
    model = build_model(cfg)
    assert ckpt.load_into(model).ok
    assert torch.equal(model.heads[1][2].predict.weight, original["posenet.outs.1.2.conv.weight"])
    assert convert_main(["--weights", str(out), "--out", str(tmp_path / "again.pt")]) == 2
