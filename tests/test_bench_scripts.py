"""The speed scripts run and print their figures (their numbers are read by people, never asserted)."""

from __future__ import annotations

import re

import pytest
import torch

from bench import data_pipeline, gpu_check


def test_data_pipeline_bench_prints_rate_and_every_stage(coco_sample_h5, capsys):
    rc = data_pipeline.main(["--h5", str(coco_sample_h5), "--n", "6", "--repeats", "1", "data.input_size=256"])
    out = capsys.readouterr().out
    assert rc == 0
    rate = re.match(r"data pipeline: ([0-9.]+) samples/s wall clock \(([0-9.]+) per CPU second", out)
    assert rate and float(rate.group(1)) > 0 and float(rate.group(2)) > 0
    assert "input 256, 50 channels, 5 scales" in out
    stages = dict(re.findall(r"^  (\S.*?)\s+([0-9.]+) ms", out, re.M))
    for stage in ("read+decode", "augment", "masks", "keypoint maps", "limb maps", "scales", "sum of stages"):
        assert stage in stages, stage
    parts = sum(float(v) for k, v in stages.items() if k != "sum of stages")
    assert abs(parts - float(stages["sum of stages"])) < 0.05


def test_gpu_check_without_a_gpu_says_so_and_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no CUDA GPU: torch.cuda.is_available() is False")
    assert "--device cpu" in out


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
