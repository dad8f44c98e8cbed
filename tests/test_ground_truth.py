"""The annotations an evaluation scores against are loaded and checked once and only read: a ``GroundTruth`` held for
many evaluations gives the figures the file does, pycocotools' object is never written to (not the images' sizes a
file lacks, not the images left out), and in-training validation reads the file at its first evaluation only."""

from __future__ import annotations

import copy
import json

import torch

from simplepose.config.config_file import load_config
from simplepose.engine import validation
from simplepose.engine.validation import Validator
from simplepose.evaluate.estimator import PoseEstimator
from simplepose.evaluate.evaluation import evaluate_images, evaluate_oracle
from simplepose.evaluate.metrics.annotations import load_ground_truth
from tests.helpers import COCO, tiny_model, tiny_model_cfg

QUICK = ["eval.scales=[1.0]", "eval.flip=false"]


def test_a_ground_truth_held_for_several_evaluations_is_only_read(synthetic_sample_images, synthetic_sample_annotations,
                                                                  tmp_path):  # fmt: skip
    data = json.loads(synthetic_sample_annotations.read_text())
    for image in data["images"][:5]:  # sizes the file does not give: the image files have them
        del image["width"], image["height"]
    data["annotations"][0]["keypoints"][2] = 7  # a bad visibility flag: its image is left out with skip_bad
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(data))
    cfg = load_config(None, [*QUICK, "eval.skip_bad=true"])

    truth = load_ground_truth(path, COCO, cfg.eval)
    assert truth.bad_image_ids == {data["annotations"][0]["image_id"]}
    assert len(truth.images) == len(data["images"]) - 1
    before_images, before_fields = copy.deepcopy(truth.coco.imgs), set(vars(truth.coco))
    estimator = PoseEstimator.from_ground_truth(truth.coco, cfg, COCO)
    first, summary = evaluate_images(synthetic_sample_images, truth, estimator, progress=False)
    again, _ = evaluate_images(synthetic_sample_images, truth, estimator, progress=False)
    assert first == again and first["AP"] > 0.5
    assert "1 images left out of the evaluation as bad (1 for their annotations, 0 for their files" in summary
    assert truth.coco.imgs == before_images and set(vars(truth.coco)) == before_fields
    assert sum(img.get("width") is None for img in truth.coco.imgs.values()) == 5
    assert evaluate_oracle(synthetic_sample_images, path, cfg, progress=False)[0] == first  # as read from the file


def test_validation_reads_the_annotations_once_per_run(synthetic_sample_annotations, monkeypatch):
    cfg = tiny_model_cfg()
    cfg.data.val_images, cfg.data.val_annotations = "unused", str(synthetic_sample_annotations)
    loads = []

    def counted(*args):
        loads.append(args[0])
        return load_ground_truth(*args)

    monkeypatch.setattr(validation, "load_ground_truth", counted)
    model = tiny_model()
    validator = Validator(cfg, model, torch.nn.Identity(), None, torch.device("cpu"), None, 0, 1)
    path = str(synthetic_sample_annotations)
    first = validator.ground_truth(model, path)
    assert validator.ground_truth(model, path) is first and validator.ground_truth(model, path) is first
    assert loads == [str(synthetic_sample_annotations)] and len(first.images) == 27
