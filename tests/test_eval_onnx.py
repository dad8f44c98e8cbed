"""ONNX end to end: the export (dynamic batch, height and width; the config in its metadata) and ONNX Runtime
running it through the same multi-scale + flip path and decoder as PyTorch."""

import json
import sys

import cv2
import numpy as np
import onnx
import pytest
import torch

from simplepose.codec.decoder.decode import decode_people
from simplepose.codec.network_input import InputShapeError
from simplepose.codec.person import keypoint_array
from simplepose.config.config_file import ConfigError, to_dict
from simplepose.data.synthetic_clips import crossing_video, write_video
from simplepose.evaluate import PoseEstimator, demo, export_onnx
from simplepose.evaluate.inference import onnx_export, onnx_runner, onnx_session
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.evaluate.inference.map_source import network_source
from simplepose.evaluate.inference.multiscale import multiscale_maps
from simplepose.utils.errors import UserError
from tests.helpers import AGREEMENT_IMAGES, COCO, assert_people_agree, people_agreement, tiny_model

CPU = torch.device("cpu")
IMAGES = AGREEMENT_IMAGES  # synthetic sample pictures: three padded input shapes per scale, enough people
# Two scales with flip at a small box keep it fast (decoder thresholds: the defaults).
AGREEMENT_EVAL = ["eval.scales=[1.0,1.5]", "eval.flip=true", "eval.boxsize=128"]


@pytest.fixture(scope="module")
def tiny_onnx(trained_tiny_ckpt, tmp_path_factory):
    """``trained_tiny_ckpt`` exported with the agreement test's eval settings, traced at 64 x 128."""
    out = tmp_path_factory.mktemp("onnx") / "tiny.onnx"
    argv = ["--ckpt", str(trained_tiny_ckpt), "--out", str(out), "--input-size", "64x128", *AGREEMENT_EVAL]
    assert export_onnx.main(argv) == 0
    return out


def test_export_has_dynamic_batch_height_and_width(tiny_ckpt, tmp_path, capsys):
    out = tmp_path / "tiny.onnx"
    assert export_onnx.main(["--ckpt", str(tiny_ckpt), "--out", str(out), "--input-size", "64x128"]) == 0
    printed = capsys.readouterr().out
    assert "onnxruntime matches PyTorch at (1, 3, 64, 128) and (2, 3, 128, 64)" in printed
    graph = onnx.load(str(out)).graph
    dims = lambda value: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]  # noqa: E731
    assert dims(graph.input[0]) == ["batch", 3, "height", "width"]
    assert dims(graph.output[0]) == ["batch", 50, "rows", "cols"]
    assert graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT

    model = tiny_model()
    inputs = [onnx_export.example_input(192, 64, batch=3, seed=2), onnx_export.example_input(64, 64, seed=3)]
    expected = onnx_export.FinestOutput(model)(inputs[0])
    assert expected.shape == (3, 50, 48, 16) and expected.abs().mean() > 1e-2  # a comparison worth making
    diff = onnx_export.compare_with_onnxruntime(model, out, inputs)
    assert diff is not None and diff < onnx_export.TOLERANCE
    assert [p.name for p in tmp_path.iterdir()] == ["tiny.onnx"]  # written atomically, no leftovers

    assert export_onnx.main(["--ckpt", str(tiny_ckpt), "--out", str(out), "--input-size", "50"]) == 2
    assert "50x50" in capsys.readouterr().err
    assert export_onnx.main(["--ckpt", str(tiny_ckpt), "--out", str(out), "--input-size", "64x64x64"]) == 2


def test_square_example_is_checked_at_a_non_square_size():
    sizes = [tuple(x.shape) for x in onnx_export.check_inputs(64, 64)]
    assert sizes == [(1, 3, 64, 64), (2, 3, 64, 128)]


def test_the_onnx_file_alone_rebuilds_the_config(trained_tiny_ckpt, tiny_onnx, tmp_path):
    predict, cfg = onnx_runner.load_onnx(tiny_onnx)
    _, expected = load_model(str(trained_tiny_ckpt), None, AGREEMENT_EVAL, CPU)
    assert to_dict(cfg) == to_dict(expected) and cfg.eval.scales == [1.0, 1.5]
    assert predict.skeleton == COCO and predict.providers == ["CPUExecutionProvider"]
    _, changed = onnx_runner.load_onnx(tiny_onnx, overrides=["eval.flip=false"])
    assert changed.eval.flip is False and cfg.eval.flip is True

    # the model's skeleton definition travels in the metadata; an export without one falls back to data.skeleton
    out = tmp_path / "without_skeleton.onnx"
    onnx_export.export_onnx(tiny_model(), out, (64, 64), metadata=onnx_export.export_metadata(cfg))
    predict, _ = onnx_runner.load_onnx(out)
    assert predict.metadata.skeleton is None and predict.skeleton == COCO


@pytest.mark.parametrize("noise", [0.0, 1e-5])
def test_onnx_and_pytorch_find_the_same_people(trained_tiny_ckpt, tiny_onnx, synthetic_sample_images, noise):
    """Multi-scale + flip through ``multiscale_maps`` and ``decode_people`` with each map source: maps within 1e-4
    (measured here: at most 1.3e-6, 1e-7 on average), the same people matched by OKS, keypoints within 1 px
    (``assert_people_agree``). ``noise``: the PyTorch maps moved by uniform noise of +-1e-5 at every pixel, ten times
    the largest difference measured, as another CPU's kernels could move them, in three draws counted together: the
    comparison still holds. (This briefly trained model's maps hold several times more candidate people than the
    images, with near ties: one draw alone moves the keypoints found on one side only between 1 % and 6 % of the
    shared ones, with the original's grouping as with the default; at +-1e-4 everywhere, a fifth of its people change;
    docs/testing.md#tests-and-their-data.)"""
    onnx_predict, cfg = onnx_runner.load_onnx(tiny_onnx)
    model, _ = load_model(str(trained_tiny_ckpt), None, AGREEMENT_EVAL, CPU)
    torch_predict = network_source(model)
    agreements = []
    decoder = cfg.eval
    skeleton = onnx_predict.skeleton
    for name in IMAGES:
        image = cv2.imread(str(synthetic_sample_images / name), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
        onnx_maps, scale = multiscale_maps(image, cfg.eval, onnx_predict, CPU, skeleton=skeleton)
        torch_maps, _ = multiscale_maps(image, cfg.eval, torch_predict, CPU, skeleton=model.skeleton)
        assert np.abs(onnx_maps - torch_maps).max() < 1e-4
        got = decode_people(onnx_maps, decoder, scale, skeleton=skeleton)
        for seed in range(3 if noise else 1):
            moved = torch_maps + np.random.default_rng(seed).uniform(-noise, noise, torch_maps.shape).astype(np.float32)
            want = decode_people(moved, decoder, scale, skeleton=model.skeleton)
            k = skeleton.num_dataset_keypoints
            agreements.append(people_agreement(keypoint_array(got, k), keypoint_array(want, k), skeleton.sigmas))
    assert_people_agree(agreements)


def test_onnx_source_refuses_sizes_the_network_cannot_take(tiny_onnx):
    predict, _ = onnx_runner.load_onnx(tiny_onnx)
    assert predict.run(torch.zeros(2, 3, 64, 192)).shape == (2, 50, 16, 48)
    with pytest.raises(InputShapeError) as e:
        predict.run(torch.zeros(1, 3, 64, 100))
    assert e.value.shape == (1, 3, 64, 100)


def test_bad_onnx_files_give_clean_errors(tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    for path in (tmp_path / "none.onnx", garbage):
        with pytest.raises(UserError) as e:
            onnx_runner.load_onnx(path)
        assert e.value.file == str(path)
    bare = tmp_path / "bare.onnx"
    onnx_export.export_onnx(tiny_model(), bare, (64, 64))  # no metadata
    with pytest.raises(UserError) as e:
        onnx_runner.load_onnx(bare)
    assert (e.value.file, e.value.key) == (str(bare), onnx_session.CONFIG_KEY)


def test_missing_onnxruntime_and_unknown_devices_give_clean_errors(monkeypatch):
    available = onnx_session.import_onnxruntime().get_available_providers()
    assert onnx_session.providers_for("cpu") == ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" in available:
        assert onnx_session.providers_for("cuda:1")[0] == ("CUDAExecutionProvider", {"device_id": 1})
    else:
        assert onnx_session.providers_for("auto") == ["CPUExecutionProvider"]
        with pytest.raises(UserError) as e:
            onnx_session.providers_for("cuda")
        assert e.value.key == "device"
    with pytest.raises(UserError) as e:
        onnx_session.providers_for("tpu")
    assert e.value.key == "device"
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as when it is not installed
    with pytest.raises(UserError) as e:
        onnx_runner.load_onnx("any.onnx")
    assert e.value.key == "onnxruntime"


def test_from_onnx_finds_the_people_of_from_checkpoint(
    trained_tiny_ckpt, tiny_onnx, synthetic_sample_images, one_thread
):
    """The Python API on both: the ONNX file alone brings the same eval settings, skeleton and people."""
    onnx_estimator = PoseEstimator.from_onnx(tiny_onnx, "cpu")
    overrides = dict(scales=[1.0, 1.5], flip=True, boxsize=128)  # AGREEMENT_EVAL
    torch_estimator = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", **overrides)
    assert onnx_estimator.cfg == torch_estimator.cfg and onnx_estimator.skeleton == torch_estimator.skeleton
    images = [cv2.imread(str(synthetic_sample_images / name)) for name in IMAGES]
    agreements = [
        people_agreement([p.keypoints for p in got], [p.keypoints for p in want], COCO.sigmas)
        for got, want in zip(onnx_estimator(images), torch_estimator(images))
    ]
    assert_people_agree(agreements)
    assert PoseEstimator.from_onnx(tiny_onnx, flip=False).cfg.flip is False
    with pytest.raises(ConfigError) as e:
        PoseEstimator.from_onnx(tiny_onnx, flipp=False)
    assert e.value.key == "eval.flipp" and "eval.flip" in e.value.suggestions


def test_demo_runs_an_onnx_model_on_an_image(trained_tiny_ckpt, tiny_onnx, synthetic_sample_images, tmp_path, capsys):
    image = synthetic_sample_images / IMAGES[0]
    out_json, out_dir = tmp_path / "onnx.json", tmp_path / "drawn"
    argv = ["--onnx", str(tiny_onnx), "--input", str(image), "--json", str(out_json), "--out", str(out_dir)]
    assert demo.main([*argv, "--device", "cpu", "eval.flip=false"]) == 0
    assert "network" in capsys.readouterr().out and (out_dir / f"{image.stem}_pose.jpg").is_file()
    results = json.loads(out_json.read_text())
    assert {r["image_id"] for r in results} == {int(image.stem)}
    people = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", scales=[1.0, 1.5], flip=False, boxsize=128)(
        cv2.imread(str(image), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    )
    assert len(results) == len(people) > 0  # the ONNX network through the same decoder as PyTorch's


def test_demo_tracks_an_onnx_models_people_as_the_checkpoints(trained_tiny_ckpt, tiny_onnx, tmp_path, one_thread):
    """--onnx --track on a video: the same people and ids as --ckpt --track, and their smoothed keypoints as close as
    two decodings of maps equal within float tolerance are (``assert_people_agree``; a near tie flipped by the last
    bits moves a keypoint)."""
    clip = tmp_path / "clip.mp4"
    write_video(crossing_video(hidden_frames=3, size=(128, 176), fps=15.0, height=72.0, num_frames=16), clip)
    fast = ["eval.scales=[1.0]", "eval.flip=false", "eval.boxsize=128", "track.min_hits=1"]
    results = {}
    for model in (["--onnx", str(tiny_onnx)], ["--ckpt", str(trained_tiny_ckpt)]):
        out_json = tmp_path / f"{model[0][2:]}.json"
        argv = [*model, "--input", str(clip), "--track", "--smooth", "--json", str(out_json), "--device", "cpu"]
        assert demo.main([*argv, *fast]) == 0
        results[model[0]] = sorted(json.loads(out_json.read_text()), key=lambda r: (r["image_id"], r["track_id"]))
    got, want = results["--onnx"], results["--ckpt"]
    assert len(want) >= 8 and all(isinstance(r["track_id"], int) for r in got)
    assert [(r["image_id"], r["track_id"]) for r in got] == [(r["image_id"], r["track_id"]) for r in want]
    frame = lambda rs, i: [r["keypoints"] for r in rs if r["image_id"] == i]  # noqa: E731
    frames = sorted({r["image_id"] for r in want})
    assert_people_agree([people_agreement(frame(got, i), frame(want, i), COCO.sigmas) for i in frames], min_people=8)


def test_a_checkpoint_given_as_onnx_is_pointed_to_ckpt(tiny_ckpt, synthetic_sample_images, tmp_path, capsys):
    """``--onnx best.pt``: one line saying it is a PyTorch checkpoint, given with --ckpt (or exported first), not
    ONNX Runtime's "Protobuf parsing failed ... export it again"."""
    out = tmp_path / "demo.json"
    image = sorted(synthetic_sample_images.iterdir())[0]
    assert demo.main(["--onnx", str(tiny_ckpt), "--input", str(image), "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and not out.exists()
    assert f"{tiny_ckpt} is a ZIP archive, not an ONNX model" in err and f"--ckpt {tiny_ckpt}" in err
    assert "python -m evaluate.export_onnx --ckpt" in err and "Protobuf" not in err
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(UserError, match="empty.onnx is an empty file"):
        onnx_runner.load_onnx(empty)
