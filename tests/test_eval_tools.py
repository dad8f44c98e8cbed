"""Command-line tools of the test-time path: coco_eval with a checkpoint, demo, ONNX export."""

import cv2
import numpy as np
import pytest
import torch

from config.loader import to_dict
from config.schema import Config, ModelConfig
from evaluate import coco_eval, demo, export_onnx
from models import build_model

TINY = ModelConfig(stacks=2, inp_dim=16, increase=8, num_scales=5, head_channels=16, se_reduction=4)


def tiny_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = Config()
    cfg.model = TINY
    cfg.loss.stack_weights = [1.0, 1.0]
    model = build_model(cfg)
    with torch.no_grad():  # random weights large enough for outputs far from 0
        for p in model.parameters():
            p.normal_(0.0, 0.1)
    return model.eval()


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    cfg = Config()
    cfg.model = TINY
    cfg.loss.stack_weights = [1.0, 1.0]
    path = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    torch.save({"model": tiny_model().state_dict(), "config": to_dict(cfg), "epoch": 0}, path)
    return path


def test_onnx_export_matches_pytorch(tiny_ckpt, tmp_path, capsys):
    out = tmp_path / "tiny.onnx"
    assert export_onnx.main(["--ckpt", str(tiny_ckpt), "--out", str(out), "--input-size", "64"]) == 0
    assert "onnxruntime matches PyTorch" in capsys.readouterr().out
    model = tiny_model()
    example = torch.rand(1, 3, 64, 64)
    expected = export_onnx.FinestOutput(model)(example)
    assert expected.shape == (1, 50, 16, 16) and expected.abs().mean() > 1e-2  # a comparison worth making
    diff = export_onnx.compare_with_onnxruntime(model, out, example)
    assert diff is not None and diff < export_onnx.TOLERANCE
    assert [p.name for p in tmp_path.iterdir()] == ["tiny.onnx"]  # written atomically, no leftovers
    assert export_onnx.main(["--ckpt", str(tiny_ckpt), "--out", str(out), "--input-size", "50"]) == 2


def test_coco_eval_cli_with_a_checkpoint(tiny_ckpt, coco_sample_images, coco_sample_annotations, tmp_path, capsys):
    out = tmp_path / "res.json"
    data = ["--images", str(coco_sample_images), "--annotations", str(coco_sample_annotations)]
    args = ["--ckpt", str(tiny_ckpt), *data]
    small = ["eval.boxsize=64", "eval.max_images=2"]
    rc = coco_eval.main([*args, "--scales", "1", "--no-flip", "--out", str(out), *small])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "AP " in printed and out.is_file()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    assert coco_eval.main(["--ckpt", str(bad), *data]) == 2
    assert "bad.pt" in capsys.readouterr().err
    assert coco_eval.main(["--images", str(coco_sample_images), "--annotations", str(tmp_path / "none.json")]) == 2


def test_demo_draws_skeletons_on_a_real_image(coco_sample_images, coco_sample_annotations, tmp_path, capsys):
    src = coco_sample_images / "000000129648.jpg"
    rc = demo.main([
        "--from-ground-truth", "--annotations", str(coco_sample_annotations), "--input", str(src),
        "--out", str(tmp_path), "eval.scales=[1.0]",
    ])  # fmt: skip
    assert rc == 0
    drawn = cv2.imread(str(tmp_path / "000000129648_pose.jpg"))
    original = cv2.imread(str(src))
    assert drawn.shape == original.shape
    assert np.abs(drawn.astype(int) - original).mean() > 1.0
    printed = capsys.readouterr().out
    assert "people" in printed and "network" in printed and "decoding" in printed
    assert " 0 people" not in printed


def test_demo_with_a_checkpoint_on_a_folder_and_a_video(tiny_ckpt, tmp_path, capsys):
    frames = tmp_path / "in"
    frames.mkdir()
    rng = np.random.default_rng(0)
    for i in range(1):
        cv2.imwrite(str(frames / f"f{i}.png"), rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    common = ["--ckpt", str(tiny_ckpt), "--out", str(tmp_path / "out"), "eval.scales=[1.0]", "eval.boxsize=64"]
    assert demo.main(["--input", str(frames), *common]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["f0_pose.jpg"]
    video = tmp_path / "clip.mp4"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 5, (64, 48))
    for _ in range(2):
        writer.write(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    writer.release()
    assert demo.main(["--input", str(video), *common]) == 0
    assert (tmp_path / "out" / "clip_pose.mp4").stat().st_size > 0
    assert "frame 2:" in capsys.readouterr().out
