"""The bench scripts run and print their figures (their numbers are read by people, never asserted)."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch

from bench import data_pipeline, decoder_table, gpu_check, grouping, grouping_oracle, model, syncbn_check
from simplepose.config.config_file import load_config
from simplepose.config.schema import OUTPUT_STRIDE
from simplepose.data.dataset import SimplePoseDataset
from simplepose.evaluate.inference.map_source import ImageMeta, InputBatch
from simplepose.evaluate.inference.multiscale import fuse_flip
from simplepose.models import build_model
from tests.harness import bad_input_table
from tests.harness.bad_inputs import build_corpus
from tests.harness.cases import run_cases
from tests.harness.faults import write_fault_train_code
from tests.helpers import COCO, COCO_LAYOUT, keypoints_oracle, person, save_tiny_checkpoint
from tests.paths import REPO_ROOT, TINY_PRESET


def test_data_pipeline_bench_prints_rate_and_every_stage(synthetic_sample_h5, capsys):
    rc = data_pipeline.main(["--h5", str(synthetic_sample_h5), "--n", "6", "--repeats", "1", "data.input_size=256"])
    out = capsys.readouterr().out
    assert rc == 0
    rate = re.match(r"data pipeline: ([0-9.]+) samples/s wall clock \(([0-9.]+) per CPU second", out)
    assert rate  # both rates printed as numbers (their values: measurements, not asserted)
    assert "input 256, 50 channels, 5 scales" in out
    stages = dict(re.findall(r"^  (\S.*?)\s+([0-9.]+) ms", out, re.M))
    for stage in ("read+decode", "augment", "masks", "keypoint maps", "limb maps", "scales", "sum of stages"):
        assert stage in stages, stage
    # the figures are measurements: only their presence is tested here, the table's arithmetic below


def test_the_stage_table_gives_each_stage_its_share_and_the_sum():
    table = data_pipeline.stage_table({"read+decode": 3.0, "augment": 1.0, "masks": 0.5, "keypoint maps": 0.5})
    lines = [line.split() for line in table.splitlines()]
    assert lines[0] == ["read+decode", "3.00", "ms", "60.0", "%"] and lines[1][-2] == "20.0"
    assert lines[-1] == ["sum", "of", "stages", "5.00", "ms"] and len(lines) == 5


def test_the_timed_stages_make_the_samples_of_the_dataset(synthetic_sample_h5):
    """The bench times the dataset's own stage calls: they must build exactly what ``dataset[i]`` builds."""
    ds = SimplePoseDataset(synthetic_sample_h5, load_config(None, ["data.input_size=256"]), train=True)
    ds.set_epoch(1)
    timer = data_pipeline.StageTimer()
    for i in (0, 5):
        staged, item = data_pipeline.build_in_stages(ds, i, timer), ds[i]
        assert torch.equal(staged["image"], item["image"])
        for key in ("targets", "masks"):
            assert len(staged[key]) == len(item[key]) == 5
            assert all(torch.equal(a, b) for a, b in zip(staged[key], item[key]))
    assert set(timer.total) == {"read+decode", "augment", "masks", "targets", "scales", "to-tensor"}


def test_grouping_bench_prints_both_rates(sample_kind, sample_images, sample_annotations, capsys):
    """On the synthetic sample given, and on the real one found without being given (the bench's default)."""
    given = [] if sample_kind == "coco" else ["--images", str(sample_images), "--annotations", str(sample_annotations)]
    rc = grouping.main(["--repeat", "1", *given])
    out = capsys.readouterr().out
    assert rc == 0
    images = len(json.loads(sample_annotations.read_text())["images"])
    assert out.startswith(f"{images} images, ")
    for figure in (
        "decoding \\(peaks \\+ limbs \\+ assembly\\)",
        "post-network \\(flip fusion \\+ resize \\+ decoding\\)",
    ):
        rate = re.search(f"^{figure}: ([0-9.]+) images/s$", out, re.M)
        assert rate, figure  # printed as a number; its value is a measurement, not asserted


def test_grouping_bench_alternates_two_decoders_and_times_crowds(
    sample_kind, sample_images, sample_annotations, capsys
):
    """``--versus``: a rate per side over the same maps; ``--crowds``: a time per image and per person for each crowd
    size and side, every person of the synthetic crowd found by both (on the real sample where there is one)."""
    given = [] if sample_kind == "coco" else ["--images", str(sample_images), "--annotations", str(sample_annotations)]
    versus = ["--versus", "eval.join_limbs=0", "eval.share_peaks=0"]
    rc = grouping.main(["--repeat", "1", *given, *versus, "--crowds", "3", "6"])
    out = capsys.readouterr().out
    assert rc == 0
    for side in ("configured", "eval.join_limbs=0 eval.share_peaks=0"):
        assert re.search(f"^decoding, alternated rounds: {side}: [0-9.]+ images/s", out, re.M), side
        for n in (3, 6):
            found = re.search(
                f"^crowd of {n}, {side}: [0-9.]+ ms per image, [0-9.]+ ms per person, ([0-9.]+) found", out, re.M
            )
            assert found and float(found.group(1)) >= n, (n, side)


def test_grouping_bench_finds_the_sample_through_the_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SIMPLEPOSE_COCO_SAMPLE", str(tmp_path / "elsewhere"))
    assert grouping.main(["--repeat", "1"]) == 2
    assert str(tmp_path / "elsewhere") in capsys.readouterr().err


def test_grouping_oracle_prints_a_row_per_decoder_and_subset(synthetic_crowdpose, tmp_path, capsys):
    """Synthetic CrowdPose people (their annotations carry a crowdIndex): AP easy / medium / hard columns, every
    decoder on every subset, the rows also written as JSON, and an existing JSON path refused."""
    annotations = synthetic_crowdpose / "annotations" / "person_keypoints_train.json"
    out_json = tmp_path / "rows.json"
    args = ["--annotations", str(annotations), "--skeleton", "crowdpose", "--subsets", "all", "crowded3", "odd",
            "--limit", "6", "--no-progress", "--json", str(out_json), "eval.scales=[1.0]"]  # fmt: skip
    assert grouping_oracle.main(args) == 0
    out = capsys.readouterr().out
    assert "| decoder | subset | images | AP | AP easy | AP medium | AP hard |" in out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ") and "decoder" not in line]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [
        (d, s) for s in ("all", "crowded3", "odd") for d in grouping_oracle.DECODERS
    ]
    written = json.loads(out_json.read_text())
    assert len(written) == len(rows) and {"AP_hard", "AP"} <= set(written[0]["stats"])
    assert all(0.0 <= r["stats"]["AP"] <= 1.0 and "images_per_s" in r for r in written)  # speed: printed, not asserted
    assert grouping_oracle.main(args) == 2  # the JSON is never overwritten
    assert str(out_json) in capsys.readouterr().err


def test_the_oracle_table_shows_an_empty_crowd_group_as_a_dash_not_as_minus_one():
    """A subset without easy or medium images (the most crowded ones): pycocotools' -1 for those groups is printed as
    "-", the figures that exist as they are."""
    stats = {"AP": 0.925, "AP_easy": -1.0, "AP_medium": -1.0, "AP_hard": 0.924}
    row = grouping_oracle.Row("default", "crowded100", 100, stats, 0.016, 0.019, 0.007, 0.024, 514, 6, 430, 3, 2,
                              0.004, 0.002, 177.0, [])  # fmt: skip
    cells = [c.strip() for c in grouping_oracle.table([row], crowdpose=True).splitlines()[2].split("|")[1:-1]]
    assert cells[3:7] == ["0.925", "-", "-", "0.924"]
    assert cells[9:11] == ["3 of 430 (0.004)", "2 of 430 (0.002)"]  # people lost: merged, missed (the AP they cost)
    assert "-1.000" not in grouping_oracle.table([row], crowdpose=True)


def test_the_oracle_bench_decoders_are_what_their_names_say():
    """ "original" is the original's documented switch-back, "before" the defaults of the last release, "default" the
    defaults as they are."""
    from simplepose.config.schema import EvalConfig

    base = EvalConfig()
    original = grouping_oracle.decoder_config(base, "original")
    assert (original.decode_height, original.grouping, original.one_per_plateau, original.join_fragments) == (
        0, "limb_order", False, 0.0)  # fmt: skip
    assert (original.refine_mode, original.refine_xy_swap_bug, original.min_parts) == ("centroid", True, 2)
    assert grouping_oracle.decoder_config(base, "default") == base
    before = grouping_oracle.decoder_config(base, "before")
    assert before.decode_height == 192 and before.grouping == "limb_order" and before.join_fragments == 0
    before_60 = grouping_oracle.decoder_config(base, "before_60")
    assert before_60 == dataclasses.replace(base, join_limbs=0.0, share_peaks=0.0)


def test_decoder_table_prints_a_row_per_candidate_for_each_kind_of_maps(
    synthetic_coco, synthetic_sample_images, synthetic_sample_annotations, tmp_path, capsys
):
    cfg = load_config(TINY_PRESET)  # a random-weight 1-stack model evaluated at 64 px: (b) runs, its AP is ~0
    ckpt = tmp_path / "tiny.pt"
    save_tiny_checkpoint(ckpt, build_model(cfg), cfg)
    oracle = ["--images", str(synthetic_sample_images), "--annotations", str(synthetic_sample_annotations)]  # (a) (c)
    args = [*oracle, "--ckpt", str(ckpt), "--val-dir", str(synthetic_coco), "--limit", "2",
            "--decode-height", "96", "0", "--refine", "quadratic", "--min-parts", "1", "--peak-score", "input_window",
            "--max-peaks", "100", "--no-progress", "eval.scales=[1.0]"]  # fmt: skip
    assert decoder_table.main(args) == 0
    out = capsys.readouterr().out
    for name in ("(a) oracle", "(b) model", "(c) degraded"):
        assert re.search(rf"^{re.escape(name)}: 2 images, scales \[1.0\]", out, re.M), name
    header = next(line for line in out.splitlines() if line.startswith("| decode_height"))
    assert [c.strip() for c in header.split("|")[6:-2]] == [
        f"{n} {s}" for n in ("(a) oracle", "(b) model", "(c) degraded") for s in ("AP", "AR")
    ]
    rows = [line.split("|")[1:-1] for line in out.splitlines() if re.match(r"^\| (96|full) \|", line)]
    assert [r[0].strip() for r in rows] == ["96", "full", "full"] and rows[2][-1].strip() == "original decoder"
    oracle_ap = [float(r[5]) for r in rows]
    assert all(0.5 < ap <= 1 for ap in oracle_ap)  # ground-truth maps of two images: most people found


def test_degraded_maps_follow_the_documented_recipe():
    targets = load_config(None).targets
    oracle = keypoints_oracle(person(40, 5)[None] * (0.5, 0.5, 1), targets, COCO)
    meta = ImageMeta(0, (128, 160), (128, 160), (128, 160))
    batch = InputBatch(torch.zeros(2, 3, 128, 160), (meta,), flipped=True)  # an image, its mirror
    d = decoder_table.Degradation()
    n = COCO.num_limbs + COCO.num_keypoints  # the limb and keypoint channels come first

    def degraded(seed: int, source=oracle, **changes):
        rng, recipe = np.random.default_rng(seed), dataclasses.replace(d, **changes)
        errors = decoder_table.random_errors(rng, (128, 160), recipe, COCO)
        maps = decoder_table.degraded_source(source, errors, rng, recipe, True, targets.sigma, OUTPUT_STRIDE, COCO)
        return maps(batch).numpy(), errors

    clean = oracle(batch).numpy()
    assert np.array_equal(degraded(0)[0], degraded(0)[0]) and not np.array_equal(degraded(0)[0], degraded(1)[0])
    blurred, errors = degraded(0, bumps_per_keypoint=0, noise_std=0.0)
    assert 0.4 <= errors.gains[:n].min() < errors.gains[:n].max() <= 0.8 and np.all(errors.gains[n:] == 1)
    for image, gains in ((0, errors.gains), (1, errors.gains[list(COCO_LAYOUT.flip)])):  # the mirror's channels
        for c in range(n):  # limb and keypoint channels: blurred (sigma 1 cell), times the channel's gain
            expected = gains[c] * cv2.GaussianBlur(clean[image, c], (0, 0), 1.0, borderType=cv2.BORDER_REPLICATE)
            assert np.allclose(blurred[image, c], expected, atol=1e-6)
    assert np.array_equal(blurred[:, n:], clean[:, n:])
    nobody = keypoints_oracle(np.zeros((0, 18, 3)), targets, COCO)
    bumped, errors = degraded(0, source=nobody, noise_std=0.0)
    fused = fuse_flip(torch.from_numpy(bumped), torch.tensor(COCO_LAYOUT.flip))[0].numpy()
    assert np.allclose(fused, bumped[0], atol=1e-5)  # the same in the mirror
    for c, x, y, height in errors.bumps.tolist():
        row, col = min(max(round((y - 1.5) / 4), 0), 31), min(max(round((x - 1.5) / 4), 0), 39)
        assert bumped[0, int(c), row, col] >= 0.9 * height  # max-combined: a bump only raises the map


def test_model_bench_prints_a_row_per_case(capsys):
    argv = ["--presets", "quickstart", "--sizes", "64", "--dtypes", "fp32", "--channels-last", "off", "--warmup", "0",
            "--iters", "1"]  # fmt: skip
    assert model.main(argv) == 0
    row = re.search(r"^quickstart\s+64 fp32\s+off\s+([0-9.]+)\s+([0-9.]+)$", capsys.readouterr().out, re.M)
    assert row and float(row.group(1)) > 0 and float(row.group(2)) > 0


def test_model_bench_memory_says_it_measures_nothing_without_cuda(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on this machine, also on a GPU runner
    assert model.main(["--memory"]) == 0
    assert "does not measure memory on this machine" in capsys.readouterr().out


def test_model_bench_memory_runs_its_training_steps_on_the_cpu(capsys, one_thread):
    args = ["--memory", "--device", "cpu", "--presets", "quickstart", "--sizes", "128", "--batches", "1",
            "--dtypes", "fp32", "--warmup", "0"]  # fmt: skip
    assert model.main(args) == 0
    out = capsys.readouterr().out
    assert "memory is not measured on the cpu" in out
    rows = re.findall(r"^quickstart +128 float32 +(\d+) +- +- +- +- +([0-9.]+) +([0-9.]+)$", out, re.M)
    assert [r[0] for r in rows] == ["1"]  # the plain and the checkpointed step both ran, each timed (not asserted)


def test_syncbn_check_refuses_cleanly_outside_torchrun(capsys):
    assert syncbn_check.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "torchrun --nproc_per_node=2 -m bench.syncbn_check" in err


@pytest.mark.parametrize("script", ["tests.harness.bad_input_table", "tests.harness.fault_table"])
def test_fault_scripts_start_from_the_command_line(script):
    """Their full runs take minutes; --help proves the command and the harness it imports load."""
    r = subprocess.run([sys.executable, "-m", script, "--help"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and "usage:" in r.stdout and r.stderr == "", r.stderr[-2000:]


def test_bad_inputs_report_prints_a_line_per_case_and_the_totals(synthetic_sample, tmp_path, capsys):
    cases = build_corpus(synthetic_sample, tmp_path, only=["control_convert", "json_malformed"])
    assert bad_input_table.print_report(cases, run_cases(cases)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in lines[:2]] == [["ok", "control_convert", "accepted"],
                                                        ["ok", "json_malformed", "clean_error"]]  # fmt: skip
    assert lines[2] == (
        "2 cases: 1 clean_error, 0 counted_skip, 0 raw_traceback, 1 accepted; 0 with partial output; 0 not as expected"
    )


def test_the_injected_write_fault_command_runs_train_py():
    """The fault table runs train.py under write_fault in a subprocess through this code: it must import and start."""
    code = write_fault_train_code("ENOSPC")
    r = subprocess.run([sys.executable, "-c", code, "--help"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and "train.resume=auto" in r.stdout, r.stderr[-2000:]


def test_gpu_check_without_a_gpu_says_so_and_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no CUDA GPU: torch.cuda.is_available() is False")
    assert "--device cpu" in out


def test_gpu_check_dry_run_on_the_cpu_trains_compiled_and_evaluates(capsys, one_thread):
    """The training and evaluation sections at toy sizes on the CPU (the tiny network, dynamo's eager backend):
    every line they print on a GPU is printed, so the script is known to run before a GPU is lent."""
    assert gpu_check.main(["--device", "cpu", "--sections", "train", "eval"]) == 0
    out = capsys.readouterr().out
    for line in ("| training, bf16 eager, batch 2 |", "| training, bf16 compiled, batch 2 |",
                 "0 host syncs per step between logs", "top kernels of training step", "top kernels of an evaluation",
                 "| evaluation, 2 scales + flip, float32 |", "| evaluation, 1 scale + flip, bf16 |",
                 "| evaluation AP vs the CPU path |", "preprocessing"):  # fmt: skip
        assert line in out, line
    assert "FAILED" not in out


def test_gpu_check_halves_the_batch_until_it_fits(capsys):
    tried = []

    def measure(batch: int) -> dict:
        tried.append(batch)
        if batch > 4:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return {"samples/s": 10.0 * batch}

    assert gpu_check.largest_batch(measure, 16) == (4, {"samples/s": 40.0})
    assert tried == [16, 8, 4]
    assert "batch 16 does not fit in GPU memory; trying 8" in capsys.readouterr().out
    with pytest.raises(torch.cuda.OutOfMemoryError):
        gpu_check.largest_batch(lambda batch: measure(100), 2)


def test_gpu_check_knows_the_peak_of_the_h200_and_not_of_others():
    assert gpu_check.peak_tflops("NVIDIA H200")[0] == 989.4
    assert gpu_check.peak_tflops("NVIDIA H200 NVL")[0] == 835.5
    assert gpu_check.peak_tflops("NVIDIA H100 80GB HBM3")[0] == 989.4
    assert gpu_check.peak_tflops("NVIDIA GeForce GTX 1080") == (None, "unknown peak")


def test_cpu_inference_bench_prints_a_row_per_variant(tiny_ckpt, synthetic_sample_images, capsys, one_thread):
    from bench import cpu_inference

    argv = ["--model", f"tiny={tiny_ckpt}:{synthetic_sample_images}", "--scales", "1", "--threads", "1", "--images",
            "1", "--rounds", "2", "--variants", "fp32", "fp32-cl", "bf16-cl", "ort"]  # fmt: skip
    assert cpu_inference.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("CPU: ") and "eval.amp=auto here: " in out
    rows = re.findall(r"^\| tiny \| 1 \+ flip \| 1 \| 1 \| (\S+)[^|]*\| ([0-9.]+) \(", out, re.M)
    assert [v for v, _ in rows] == ["fp32", "fp32-cl", "bf16-cl", "ort"]
    assert len(re.findall(r"^\| tiny .*\| [0-9.]+x \|$", out, re.M)) == 4  # each with its ratio column (not judged)
    assert len(re.findall(r"\(auto\)", out)) <= 1  # what auto chooses here, marked once (or not among these)


def test_runtime_bench_prints_both_install_sizes_and_a_row_per_path_and_setting(
    tiny_ckpt, synthetic_sample_images, capsys, one_thread
):
    from bench import runtime

    argv = ["--ckpt", str(tiny_ckpt), "--images", str(synthetic_sample_images), "--count", "1", "--rounds", "1",
            "--boxsize", "64"]  # fmt: skip
    assert runtime.main(argv) == 0
    out = capsys.readouterr().out
    sizes = re.findall(r"^install size, (PyTorch path|runtime): ([0-9]+) MB", out, re.M)
    assert [name for name, _ in sizes] == ["PyTorch path", "runtime"] and all(int(mb) > 0 for _, mb in sizes)
    rows = re.findall(r"^\| (1 scale|5 scales) \+ flip \| ([^|]+) \| [0-9.]+ \(", out, re.M)
    paths = ["PyTorch network", "PoseEstimator.from_onnx", "runtime (OnnxPoseEstimator)"]
    assert rows == [(s, p) for s in ("1 scale", "5 scales") for p in paths]


def test_test_time_precision_bench_matches_people_and_scores_both_sides(
    trained_tiny_ckpt, synthetic_sample_images, synthetic_sample_annotations, capsys, one_thread
):
    from bench import test_time_precision

    argv = ["--ckpt", str(trained_tiny_ckpt), "--images", str(synthetic_sample_images), "--annotations",
            str(synthetic_sample_annotations), "--max-images", "3", "eval.scales=[1.0]", "eval.boxsize=128",
            "--candidate", "eval.channels_last=on", "eval.amp=off"]  # fmt: skip
    assert test_time_precision.main(argv) == 0
    out = capsys.readouterr().out
    assert re.search(r"^reference \(eval.amp=off eval.channels_last=off\): \d+ people on 3 images, .*AP [0-9.]+", out,
                     re.M)  # fmt: skip
    assert re.search(r"^candidate \(eval.channels_last=on eval.amp=off\): \d+ people on 3 images", out, re.M)
    assert re.search(r"^all people, matched by OKS >= 0.5: \d+ pairs; unmatched: \d+ of the reference's", out, re.M)
    assert re.search(r"^all people: shared keypoints of matched people: \d+; within 1 px [0-9.]+%, within 2 px", out,
                     re.M)  # fmt: skip


def test_grouping_bench_records_the_people_and_tells_a_changed_decoder(
    sample_kind, sample_images, sample_annotations, tmp_path, capsys
):
    """``--record`` then ``--same-as``: the same decoder finds the same people (exit 0), another setting does not
    (exit 1); a record is never replaced, and a missing one is named, both before any map is made."""
    given = [] if sample_kind == "coco" else ["--images", str(sample_images), "--annotations", str(sample_annotations)]
    record = tmp_path / "people.npz"
    assert grouping.main([*given, "--record", str(record)]) == 0
    assert re.search(r"^\d+ maps, \d+ people written to ", capsys.readouterr().out, re.M)
    assert grouping.main([*given, "--same-as", str(record)]) == 0
    assert "the same people" in capsys.readouterr().out
    assert grouping.main([*given, "--same-as", str(record), "eval.peak_threshold=0.5"]) == 1
    assert "the decoder changed" in capsys.readouterr().out
    assert grouping.main([*given, "--record", str(record)]) == 2
    assert grouping.main([*given, "--same-as", str(tmp_path / "none.npz")]) == 2
    assert str(tmp_path / "none.npz") in capsys.readouterr().err
