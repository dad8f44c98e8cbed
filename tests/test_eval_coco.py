"""COCO evaluation: oracle AP on the synthetic and the real sample, results JSON, empty detections, distributed
sharding, batching."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from simplepose.codec.person import Person
from simplepose.config.schema import Config
from simplepose.evaluate.evaluation import evaluate_model, evaluate_oracle
from simplepose.evaluate.metrics.coco_results import coco_results, results_text
from simplepose.evaluate.metrics.keypoint_stats import STAT_NAMES
from tests.helpers import COCO, subprocess_env, torchrun_command
from tests.paths import REPO_ROOT


def single_scale_config(**eval_overrides) -> Config:
    cfg = Config()
    cfg.eval.scales = [1.0]
    cfg.eval.flip = True
    for k, v in eval_overrides.items():
        setattr(cfg.eval, k, v)
    return cfg


def test_oracle_ap(sample_images, sample_annotations, tmp_path):
    stats, summary = evaluate_oracle(
        sample_images, sample_annotations, single_scale_config(), tmp_path / "oracle.json", progress=False
    )
    print("oracle (single scale + flip):", {k: round(stats[k], 3) for k in ("AP", "AP50", "AP75", "AR")})
    assert "Average Precision" in summary
    assert stats["AP"] >= 0.90
    assert stats["AP50"] >= stats["AP"] and stats["AR"] >= 0.90
    results = json.loads((tmp_path / "oracle.json").read_text())
    assert {r["image_id"] for r in results} <= {int(p.stem) for p in sample_images.iterdir()}


def test_results_json_format():
    kp = np.zeros((2, 17, 3))
    kp[0, :, :2] = np.arange(34).reshape(17, 2) + 0.123456
    kp[0, :, 2] = 0.9
    kp[0, 5] = 0  # a keypoint that was not found
    kp[1, :, :2], kp[1, :, 2] = 10.0, 0.5
    people = [[Person.from_keypoints(kp[0], 0.25), Person.from_keypoints(kp[1], 0.75)], []]
    results = coco_results([42, 7], people)
    assert [r["score"] for r in results] == [0.75, 0.25]  # sorted by image, then descending score
    first = results[1]
    assert set(first) == {"image_id", "category_id", "keypoints", "score"}
    assert first["image_id"] == 42 and first["category_id"] == 1 and len(first["keypoints"]) == 51
    assert first["keypoints"][:3] == [0.12, 1.12, 0.9]  # v: the keypoint's score
    assert first["keypoints"][15:18] == [0.0, 0.0, 0.0]
    assert json.loads(results_text(results)) == results
    assert results_text([]) == "[]\n"


class ConstantModel(nn.Module):
    """Stand-in network: outputs[stack][scale] of constant maps at stride 4."""

    skeleton = COCO  # what its channels mean (evaluate_model reads model.skeleton)

    def __init__(self, value: float = 0.0):
        super().__init__()
        self.bias = nn.Parameter(torch.tensor(value))

    def forward(self, x):
        b, _, h, w = x.shape
        return [[self.bias.expand(b, 50, h // 4, w // 4).clone()]]


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_no_detections_give_an_empty_file_and_zero_ap(
    synthetic_sample_images, synthetic_sample_annotations, tmp_path, value
):
    # 0: no peak at all; 1: every pixel is a plateau peak but nothing forms a person worth keeping
    model = ConstantModel(value).train()
    cfg = single_scale_config(max_images=3, min_parts=2, min_mean_score=1e9)
    out = tmp_path / "res.json"
    images, annotations = synthetic_sample_images, synthetic_sample_annotations
    stats, _ = evaluate_model(model, images, annotations, cfg, torch.device("cpu"), out, False)
    assert stats == {k: 0.0 for k in STAT_NAMES}
    assert out.read_text() == "[]\n"
    assert model.training  # mode restored


@pytest.mark.slow
def test_distributed_results_are_byte_identical(synthetic_sample_images, synthetic_sample_annotations, tmp_path):
    images, annotations = str(synthetic_sample_images), str(synthetic_sample_annotations)
    args = ["--from-ground-truth", "--images", images, "--annotations", annotations]
    overrides = ["eval.scales=[1.0]", "eval.max_images=9"]
    env = subprocess_env(OMP_NUM_THREADS="1")
    single = subprocess.run(
        [sys.executable, "-m", "evaluate.coco_eval", *args, "--out", str(tmp_path / "one.json"), *overrides],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert single.returncode == 0, single.stderr
    double = subprocess.run(
        torchrun_command(["-m", "evaluate.coco_eval", *args, "--out", str(tmp_path / "two.json"), *overrides], 2),
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert double.returncode == 0, double.stderr
    one, two = (tmp_path / "one.json").read_bytes(), (tmp_path / "two.json").read_bytes()
    assert len(json.loads(one)) > 10
    assert one == two
    ap_line = [line for line in single.stdout.splitlines() if line.startswith("AP ")]
    assert ap_line and ap_line == [line for line in double.stdout.splitlines() if line.startswith("AP ")]


class BrightnessModel(nn.Module):
    """Stand-in network whose keypoint maps follow the image brightness, with limbs everywhere: it 'finds'
    people that depend on the input, which is enough to compare batched and one-by-one evaluation."""

    skeleton = COCO

    def forward(self, x):
        pooled = torch.nn.functional.avg_pool2d(x.mean(1, keepdim=True), 4)
        maps = torch.cat([torch.full_like(pooled, 0.6).expand(-1, 30, -1, -1), pooled.expand(-1, 20, -1, -1)], 1)
        return [[maps * torch.linspace(0.9, 1.0, 50).view(1, 50, 1, 1)]]


def test_batched_evaluation_gives_the_same_results(synthetic_sample_images, synthetic_sample_annotations, tmp_path):
    files = []
    for batch_size in (1, 3):
        cfg = single_scale_config(max_images=8, batch_size=batch_size, boxsize=128, max_peaks=15)
        files.append(tmp_path / f"b{batch_size}.json")
        evaluate_model(BrightnessModel(), synthetic_sample_images, synthetic_sample_annotations, cfg,
                      torch.device("cpu"), files[-1], False)  # fmt: skip
    assert len(json.loads(files[0].read_text())) > 0
    assert files[0].read_bytes() == files[1].read_bytes()
