"""`python -m evaluate.coco_eval --results FILE --annotations ...`: a results file made by any tool, scored as this
project scores its own (the same figures as the evaluation that wrote it, pycocotools' on plain files, CrowdPose's
figures for CrowdPose), and every malformed file refused naming the entry and the field."""

from __future__ import annotations

import json

import pytest

from simplepose.config.config_file import load_config
from simplepose.evaluate import coco_eval
from simplepose.evaluate.evaluation import evaluate_oracle
from simplepose.evaluate.metrics.keypoint_stats import STAT_NAMES
from simplepose.evaluate.metrics.results_file import ResultsError
from simplepose.evaluate.results_scoring import score_results
from simplepose.utils.errors import UserError
from tests.helpers import COCO, imperfect_results, pycocotools_stats

ORACLE = ["eval.scales=[1.0]", "eval.flip=false"]


def test_a_results_file_scores_as_the_evaluation_that_wrote_it(sample_images, sample_annotations, tmp_path):
    cfg = load_config(None, ORACLE)
    out = tmp_path / "oracle.json"
    stats, _ = evaluate_oracle(sample_images, sample_annotations, cfg, out, progress=False)
    again, summary = score_results(out, sample_annotations, cfg)
    assert again == stats and stats["AP"] > 0.8
    written = json.loads(out.read_text())
    assert f"scored {len(written)} results" in summary


def test_results_of_another_tool_score_as_pycocotools_scores_them(sample_annotations, tmp_path, capsys):
    data = json.loads(sample_annotations.read_text())
    results = imperfect_results(data)
    path = tmp_path / "theirs.json"
    path.write_text(json.dumps(results))
    assert coco_eval.main(["--results", str(path), "--annotations", str(sample_annotations)]) == 0
    printed = capsys.readouterr().out
    ours, _ = score_results(path, sample_annotations, load_config(None, []))
    want = pycocotools_stats(data, results, COCO.sigmas)
    assert [ours[k] for k in STAT_NAMES] == pytest.approx(want, abs=1e-12)
    assert 0.2 < ours["AP"] < 0.95  # jittered: neither nothing nor everything
    assert f"AP {ours['AP']:.3f}" in printed
    # the same list inside an object's "annotations" scores alike
    path.write_text(json.dumps({"annotations": results}))
    assert score_results(path, sample_annotations, load_config(None, []))[0] == ours


def test_images_without_results_count_as_finding_no_one(synthetic_sample_annotations, tmp_path):
    data = json.loads(synthetic_sample_annotations.read_text())
    results = imperfect_results(data)
    first = min(r["image_id"] for r in results)
    path = tmp_path / "part.json"
    kept = [r for r in results if r["image_id"] != first]
    path.write_text(json.dumps(kept))
    stats, summary = score_results(path, synthetic_sample_annotations, load_config(None, []))
    without = len(data["images"]) - len({r["image_id"] for r in kept})
    assert f"{without} of the {len(data['images'])} images have no result" in summary and "no one was found" in summary
    assert [stats[k] for k in STAT_NAMES] == pytest.approx(pycocotools_stats(data, kept, COCO.sigmas), abs=1e-12)
    # eval.max_images scores the first images only, as an evaluation with it does
    stats, summary = score_results(path, synthetic_sample_annotations, load_config(None, ["eval.max_images=2"]))
    assert "on 2 images" in summary and "left out" in summary


def test_crowdpose_results_get_crowdpose_figures(synthetic_crowdpose, tmp_path, capsys):
    images, val = synthetic_crowdpose / "images", synthetic_crowdpose / "annotations" / "person_keypoints_val.json"
    out = tmp_path / "oracle.json"
    cfg = load_config(None, [*ORACLE, "data.skeleton=crowdpose"])
    stats, _ = evaluate_oracle(images, val, cfg, out, progress=False)
    assert "AP_easy" in stats
    assert coco_eval.main(["--results", str(out), "--annotations", str(val), "--skeleton", "crowdpose"]) == 0
    printed = capsys.readouterr().out
    assert "type=  easy" in printed and f"AP_hard {stats['AP_hard']:.3f}" in printed
    assert score_results(out, val, cfg)[0] == stats
    # without the skeleton: its annotations are refused first, naming the setting to give
    with pytest.raises(UserError) as e:
        score_results(out, val, load_config(None, []))
    assert "14 keypoints" in str(e.value) and "data.skeleton" in str(e.value)


def entry(**fields) -> dict:
    return {"image_id": 0, "category_id": 1, "keypoints": [10.0, 20.0, 1.0] * 17, "score": 0.9, **fields}


BAD_FILES = {
    "missing": (None, None),
    "not JSON": ("[{'image_id': 1", None),
    "a number": ("42", None),
    "an entry that is a list": ([[1, 2, 3]], None),
    "no score": ([{k: v for k, v in entry().items() if k != "score"}], "score"),
    "no keypoints": ([{k: v for k, v in entry().items() if k != "keypoints"}], "keypoints"),
    "a short keypoint list": ([entry(keypoints=[1.0, 2.0, 1.0] * 5)], "keypoints"),
    "keypoints as a string": ([entry(keypoints="1,2,1")], "keypoints"),
    "a NaN keypoint": ([entry(keypoints=[float("nan"), 2.0, 1.0] * 17)], "keypoints"),
    "a text score": ([entry(score="high")], "score"),
    "an infinite score": ([entry(score=float("inf"))], "score"),
    "another category": ([entry(category_id=2)], "category_id"),
    "an unknown image": ([entry(image_id=987654321)], "image_id"),
    "a float image id": ([entry(image_id=1.5)], "image_id"),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_a_bad_results_file_is_refused_naming_the_entry_and_field(case, synthetic_sample_annotations, tmp_path, capsys):
    content, key = BAD_FILES[case]
    path = tmp_path / "results.json"
    first_image = json.loads(synthetic_sample_annotations.read_text())["images"][0]["id"]
    if content is not None:
        text = (
            content
            if isinstance(content, str)
            else json.dumps(content).replace('"image_id": 0', f'"image_id": {first_image}')
        )
        path.write_text(text)
    with pytest.raises(ResultsError) as e:
        score_results(path, synthetic_sample_annotations, load_config(None, []))
    assert e.value.file == str(path) and e.value.key == key and str(path) in str(e.value)
    if key is not None and case != "an unknown image":
        assert e.value.sample == 0 and "entry 0" in str(e.value)
    code = coco_eval.main(["--results", str(path), "--annotations", str(synthetic_sample_annotations)])
    err = capsys.readouterr().err
    assert code == 2 and "error:" in err and "Traceback" not in err


def test_string_image_ids_are_named_as_strings_of_the_annotations_integers(synthetic_sample_annotations, tmp_path):
    """A tool that wrote image ids as strings ("481") against annotations of integer ids (481): the message says so
    and what to do, instead of calling ids the file lists unknown."""
    data = json.loads(synthetic_sample_annotations.read_text())
    results = [{**r, "image_id": str(r["image_id"])} for r in imperfect_results(data)]
    path = tmp_path / "string_ids.json"
    path.write_text(json.dumps(results))
    with pytest.raises(ResultsError) as e:
        score_results(path, synthetic_sample_annotations, load_config(None, []))
    message = str(e.value)
    n = len({r["image_id"] for r in results})
    first = min(results, key=lambda r: r["image_id"])["image_id"]
    assert e.value.key == "image_id" and str(path) in message
    assert f"{n} image ids as strings ({first!r}" in message and "integers" in message
    assert 'write "image_id" as a number' in message and "does not list" not in message
    # ids that are neither the annotations' nor strings of them are still unknown ids, shown as they are written
    path.write_text(json.dumps([{**results[0], "image_id": "img-7"}]))
    with pytest.raises(ResultsError, match="1 image id that the annotation file does not list \\(e.g. 'img-7'\\)"):
        score_results(path, synthetic_sample_annotations, load_config(None, []))


def test_results_options_that_do_not_apply_are_refused(synthetic_sample_annotations, tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text("[]")
    for extra in (["--images", str(tmp_path)], ["--out", str(tmp_path / "o.json")], ["--ckpt", "x.pt"],
                  ["--scales", "1", "2"], ["--no-flip"]):  # fmt: skip
        assert coco_eval.main(["--results", str(path), *extra, "--annotations", str(synthetic_sample_annotations)]) == 2
    assert coco_eval.main(["--results", str(path)]) == 2
    assert "--annotations" in capsys.readouterr().err
    # an empty list is a file of a tool that found no one: every AP 0
    stats, _ = score_results(path, synthetic_sample_annotations, load_config(None, []))
    assert stats["AP"] == 0.0


def test_crowdpose_results_equal_xtcocotools(synthetic_crowdpose, tmp_path):
    """xtcocotools (mmpose's CrowdPose evaluation; its wheels need NumPy 1, so this runs only where it imports):
    the nine figures of a results file of imperfect people equal --results' own."""
    try:
        from xtcocotools.coco import COCO as XtCOCO
        from xtcocotools.cocoeval import COCOeval
    except (ImportError, ValueError) as e:
        pytest.skip(f"xtcocotools cannot be imported: {e}")
    import contextlib
    import io

    import numpy as np

    from simplepose.config.skeleton_file import load_skeleton

    annotations = synthetic_crowdpose / "annotations" / "person_keypoints_train.json"
    results = imperfect_results(json.loads(annotations.read_text()), seed=1)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    ours, _ = score_results(path, annotations, load_config(None, ["data.skeleton=crowdpose"]))
    with contextlib.redirect_stdout(io.StringIO()):
        gt = XtCOCO(str(annotations))
        ev = COCOeval(gt, gt.loadRes(str(path)), "keypoints_crowd", np.array(load_skeleton("crowdpose").sigmas),
                      use_area=False)  # fmt: skip
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    assert list(ours.values()) == pytest.approx([float(v) for v in ev.stats], abs=1e-9)


def test_results_and_annotations_swapped_or_a_folder_say_so(synthetic_sample_annotations, tmp_path, capsys):
    results = tmp_path / "r.json"
    results.write_text(json.dumps(imperfect_results(json.loads(synthetic_sample_annotations.read_text()))))
    assert coco_eval.main(["--results", str(synthetic_sample_annotations), "--annotations", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"annotation file {results} is a JSON list, as a results file is" in err
    assert "the other way round" in err
    assert coco_eval.main(["--results", str(tmp_path), "--annotations", str(synthetic_sample_annotations)]) == 2
    assert f"results file {tmp_path} is a folder" in capsys.readouterr().err
