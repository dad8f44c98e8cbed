"""The scale bench (bench/scale.py) runs at a tiny size and prints its figures (read by people, never asserted); its
annotation set has train2017's shape; its evaluation stages score as the evaluator does."""

from __future__ import annotations

import json
import re

import pytest

from bench import scale, scale_data
from bench.scale_eval import evaluation_stages
from simplepose.config.config_file import load_config
from simplepose.evaluate.results_scoring import score_results
from simplepose.utils.errors import UserError
from tests.paths import COCO_SAMPLE_ANNOTATIONS


def test_the_scaled_set_has_train2017s_share_of_images_with_people(coco_sample):
    sample = scale_data.sample_annotations(coco_sample / COCO_SAMPLE_ANNOTATIONS)
    out = scale_data.scaled_annotations(sample, 1000)
    ids = [img["id"] for img in out["images"]]
    assert ids == list(range(1, 1001)) and len({a["id"] for a in out["annotations"]}) == len(out["annotations"])
    peopled = {a["image_id"] for a in out["annotations"]}
    assert len(peopled) == round(1000 * scale_data.PEOPLE_SHARE)
    names = {img["file_name"] for img in sample["images"]}
    assert {img["file_name"] for img in out["images"]} <= names  # only the sample's files, no image written
    # each image with people holds a copy of its source image's people
    source = {img["file_name"]: img["id"] for img in sample["images"]}
    first = next(img for img in out["images"] if img["id"] in peopled)
    copied = [a for a in out["annotations"] if a["image_id"] == first["id"]]
    original = [a for a in sample["annotations"] if a["image_id"] == source[first["file_name"]]]
    assert [a["keypoints"] for a in copied] == [a["keypoints"] for a in original] and copied


def test_evaluation_stages_score_as_coco_eval_does(tmp_path, coco_sample):
    truth = scale_data.scaled_annotations(scale_data.sample_annotations(coco_sample / COCO_SAMPLE_ANNOTATIONS), 12, 1)
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    results = scale_data.results_for(truth, 5, 17)
    assert len(results) == 5 * 12
    (tmp_path / "results.json").write_text(json.dumps(results))
    stats, _ = score_results(tmp_path / "results.json", tmp_path / "truth.json", load_config(None, []))
    for path, last in (("results", "gathering"), ("training", "results JSON written")):
        stages = evaluation_stages(path, tmp_path / "truth.json", tmp_path / "results.json", tmp_path)
        names = [stage[0] for stage in stages]
        assert names[1] == "ground truth read and checked" and names[-3] == last and names[-2] == "COCO evaluation"
        assert names[-1].startswith(f"AP {stats['AP']:.3f};")  # the figure coco_eval --results prints
    assert (tmp_path / "val_results.json").is_file()


def test_scale_bench_prints_a_row_per_conversion_and_the_loader_rates(tmp_path, coco_sample, capsys, monkeypatch):
    monkeypatch.setenv("SIMPLEPOSE_COCO_SAMPLE", str(coco_sample))
    argv = ["--sizes", "20", "--convert-workers", "0", "--parts", "convert", "loader", "--workers", "0"]
    rc = scale.main([*argv, "--samples", "2", "--rounds", "1", "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    row = re.search(r"^\s+20\s+[0-9.]+\s+(\d+)\s+0\s+[0-9.]+\s+[0-9.]+", out, re.M)
    assert row and 0 < int(row[1]) <= 20  # images stored: those with a main person
    assert re.search(
        r"extrapolated to train2017 \(118,287 images.*: \d+ s as measured, \d+ CPU s, on 2 free cores ", out
    )
    reading = r"0 workers: sample file [0-9.]+, largest file \(20 images\) [0-9.]+, ratio [0-9.]+; the largest, its"
    assert re.search(reading + r" pages evicted from the page cache first: [0-9.]+, ratio [0-9.]+", out)
    assert re.search(r"us per sample: sample file \d+, largest \d+, largest evicted \d+", out)


@pytest.mark.parametrize("argv", [["--eval-images", "0"], ["--sizes", "0"], ["--convert-workers", "-1"]])
def test_scale_bench_refuses_sizes_below_one(argv):
    with pytest.raises(UserError, match=argv[0]):
        scale.check_arguments(scale.build_parser().parse_args(argv))
