"""The speed scripts run and print their figures (their numbers are read by people, never asserted)."""

from __future__ import annotations

import re

import torch

from bench import data_pipeline
from config.loader import load_config
from data.dataset import SimplePoseDataset


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


def test_the_timed_stages_make_the_samples_of_the_dataset(coco_sample_h5):
    """The bench times the dataset's own stage calls: they must build exactly what ``dataset[i]`` builds."""
    ds = SimplePoseDataset(coco_sample_h5, load_config(None, ["data.input_size=256"]), train=True)
    ds.set_epoch(1)
    timer = data_pipeline.StageTimer()
    for i in (0, 5):
        staged, item = data_pipeline.build_in_stages(ds, i, timer), ds[i]
        assert torch.equal(staged["image"], item["image"])
        for key in ("targets", "masks"):
            assert len(staged[key]) == len(item[key]) == 5
            assert all(torch.equal(a, b) for a, b in zip(staged[key], item[key]))
    assert set(timer.total) == {"read+decode", "augment", "masks", "targets", "scales", "to-tensor"}
