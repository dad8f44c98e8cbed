"""The bad-input corpus (tests.harness.bad_inputs; `python -m tests.harness.bad_input_table` prints it) on the
synthetic sample, through the real commands: every case ends in its expected outcome (a clean error naming the
file/field, a counted skip, or a correct acceptance), never a raw traceback, and leaves no partial output. The
untrusted-file cases are in test_security.py."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import h5py
import numpy as np
import pytest
import torch

from simplepose import train
from simplepose.checkpoint import original as convert_original
from simplepose.config.config_file import load_config
from simplepose.data import coco_to_hdf5, map_keypoints
from simplepose.evaluate import coco_eval, demo
from tests.harness.bad_inputs import CASE_NAMES, SECURITY_CASES, build_corpus
from tests.harness.cases import Case, run_cases, run_in_process
from tests.helpers import assert_ends_as_expected
from tests.paths import REPO_ROOT

# Corpus cases whose behaviour an existing test already asserts (they still run in the bad-input table command).
TESTED_ELSEWHERE = {
    "json_truncated": "test_data_convert.py::test_malformed_annotations_fail_cleanly",
    "keypoints_16_values": "test_data_convert.py::test_malformed_annotations_fail_cleanly (50 values)",
    "keypoints_52_values": "test_data_convert.py::test_malformed_annotations_fail_cleanly (50 values)",
    "jpeg_missing": "test_data_convert.py::test_missing_and_corrupt_images",
    "jpeg_missing_skip_bad": "test_data_convert.py::test_missing_and_corrupt_images",
    "jpeg_truncated": "test_data_convert.py::test_missing_and_corrupt_images",
    "h5_other_input_size": "test_engine.py::test_bad_inputs_give_clear_errors",
    "ckpt_truncated": "test_engine.py::test_bad_inputs_give_clear_errors, test_model_weights.py",
    "annotation_ids_from_zero": "test_eval_ids.py (the figures themselves, COCO and CrowdPose)",
    "keypoint_names_other": "test_keypoint_names.py::test_other_names_are_refused_naming_both_lists_and_the_first_"
    "difference",
    "keypoint_names_spelling": "test_keypoint_names.py::test_names_differing_only_in_spelling_need_the_switch",
    "keypoint_names_absent": "test_keypoint_names.py::test_a_file_without_names_is_taken_on_trust_with_one_line",
    "oracle_133_keypoints": "test_wholebody.py::test_oracle_ap_of_a_133_keypoint_skeleton_on_the_cpu",
    "png_images": "test_image_formats.py::test_a_png_dataset_trains",
    "other_image_formats": "test_image_formats.py::test_every_format_opencv_reads_converts_keeping_the_original_bytes",
    "jpeg_exif_rotated": "test_image_formats.py::test_exif_orientation_is_ignored_everywhere_the_same",
    "jpeg_exif_rotated_eval": "test_image_formats.py::test_exif_orientation_is_ignored_everywhere_the_same",
    "optional_fields_missing": "test_optional_fields.py",
    "optional_fields_missing_eval": "test_optional_fields.py",
    "skip_bad_wrong_folder": "test_bad_input_agreement.py::test_skip_bad_with_the_wrong_folder_stops_naming_it",
    "skip_bad_wrong_folder_eval": "test_bad_input_agreement.py::test_skip_bad_with_the_wrong_folder_stops_naming_it",
    "jpeg_truncated_eval": "test_bad_input_agreement.py::test_the_same_checks_give_the_same_counted_warnings",
    "jpeg_missing_skip_bad_eval": "test_bad_input_agreement.py::test_the_same_checks_give_the_same_counted_warnings",
    "demo_unreadable_file": "test_bad_input_agreement.py::test_the_demo_counts_and_skips_an_unreadable_file",
    # issue 27 (a few run here too, through the commands: no_labelled_person, keypoint_names_string_eval,
    # ids_past_int64, input_size_100, input_size_100_train, tiff_orientation_eval)
    **dict.fromkeys(("annotation_ids_string", "annotation_ids_string_eval", "ids_past_int64_eval"),
                    "test_bad_input_agreement.py::test_both_keep_ids_the_file_gives_and_score_them_alike"),
    **dict.fromkeys(("annotation_id_float", "annotation_id_float_eval", "image_id_string", "image_id_string_eval",
                     "keypoint_names_string", "no_labelled_person_eval"),
                    "test_bad_input_agreement.py::test_both_refuse_the_same_files_with_the_same_message"),
    **dict.fromkeys(("no_main_person_anywhere", "no_main_person_anywhere_eval"),
                    "test_bad_input_agreement.py::test_labelled_people_that_make_no_sample_stop_the_converter_but_"
                    "are_scored"),
    **dict.fromkeys(("tiff_orientation", "tiff_orientation_no_size"),
                    "test_image_formats.py::test_a_rotated_tag_tiff_converts_and_evaluates_as_stored"),
    "demo_output_exists": "test_eval_demo.py::test_demo_never_replaces_an_earlier_result_without_overwrite",
    "demo_pattern_no_images": "test_eval_demo.py::test_demo_bad_input_gives_one_clean_error",
}  # fmt: skip
# The commands refuse these before any work, so calling their main() in this process is cheap.
IN_PROCESS = ("ckpt_nan_weights", "ckpt_invalid_config", "ckpt_is_hdf5", "ckpt_is_onnx", "ckpt_is_an_image",
              "ckpt_is_yaml", "ckpt_is_json", "ckpt_random_bytes", "ckpt_empty", "ckpt_is_a_folder",
              "second_run_same_folder", "second_run_resume_from_elsewhere",
              # issue 45: refused before training
              "batch_size_zero", "lr_negative", "num_workers_negative", "epochs_zero", "warmup_negative",
              "device_as_option", "checkpoint_as_config", "data_smaller_than_a_step", "scales_zero_eval",
              "scales_option_zero_eval",
              # issue 52: hints naming the real cause, refused (or mapped) before any work
              "train_source_is_a_folder", "config_key_misspelt", "config_preset_unknown", "map_keypoints_hdf5",
              "map_keypoints_aic_spelling", "demo_out_is_a_file", "demo_missing_checkpoint")  # fmt: skip
MAINS = {("-m", "evaluate.coco_eval"): coco_eval.main, ("-m", "checkpoint.original"): convert_original.main,
         ("-m", "data.coco_to_hdf5"): coco_to_hdf5.main, ("train.py",): train.main,
         ("-m", "data.map_keypoints"): map_keypoints.main, ("-m", "evaluate.demo"): demo.main}  # fmt: skip
# Of the other cases, those whose command can run in this process (the rest train, or run the demo, in subprocesses)
IN_PROCESS_COMMANDS = {("-m", "data.coco_to_hdf5"), ("-m", "evaluate.coco_eval"), ("-m", "checkpoint.original")}
NAMES = [n for n in CASE_NAMES if n not in {*SECURITY_CASES, *TESTED_ELSEWHERE, *IN_PROCESS}]


def test_every_case_is_tested_somewhere():
    assert set(CASE_NAMES) == {*NAMES, *SECURITY_CASES, *TESTED_ELSEWHERE, *IN_PROCESS}


def command_of(case) -> tuple[str, ...]:
    """The command a case runs, as a key of MAINS (``("-m", "evaluate.coco_eval")``, ``("train.py",)`` ...)."""
    return ("-m", case.argv[2]) if case.argv[1] == "-m" else (case.argv[1],)


def run_here(case):
    command = command_of(case)
    return run_in_process(case, MAINS[command], case.argv[1 + len(command) :])


@pytest.fixture(scope="module")
def corpus(synthetic_sample, tmp_path_factory):
    """{name: (case, result)}, every case run once: the converter's and the evaluation's here, one after another,
    while the training and demo cases (which train, or set the process's threads) run beside them as subprocesses."""
    cases = build_corpus(synthetic_sample, tmp_path_factory.mktemp("bad_inputs"), only=NAMES)
    here = [c for c in cases if command_of(c) in IN_PROCESS_COMMANDS]
    apart = [c for c in cases if command_of(c) not in IN_PROCESS_COMMANDS]
    with ThreadPoolExecutor(max_workers=1) as pool:
        elsewhere = pool.submit(run_cases, apart, 2)
        results = {c.name: (c, run_here(c)) for c in here}
        results.update({c.name: (c, r) for c, r in zip(apart, elsewhere.result())})
    return results


@pytest.mark.parametrize("name", NAMES)
def test_case_ends_as_expected(corpus, name):
    assert_ends_as_expected(*corpus[name])


@pytest.fixture(scope="module")
def in_process_cases(synthetic_sample, tmp_path_factory):
    return {c.name: c for c in build_corpus(synthetic_sample, tmp_path_factory.mktemp("in_process"), only=IN_PROCESS)}


@pytest.mark.parametrize("name", IN_PROCESS)
def test_checkpoint_case_in_process(in_process_cases, name):
    case = in_process_cases[name]
    assert_ends_as_expected(case, run_here(case))


@pytest.mark.parametrize("name", ["keypoints_wrong_count_skip_bad", "keypoint_nan", "results_control"])
def test_a_case_ends_alike_in_process_and_in_a_subprocess(synthetic_sample, tmp_path, name):
    """The corpus runs most cases in this process: their outcome and message are the subprocess's."""
    here, apart = (build_corpus(synthetic_sample, tmp_path / where, only=[name])[0] for where in ("here", "apart"))
    ran_here, ran_apart = run_here(here), run_cases([apart])[0]
    assert ran_here.outcome == ran_apart.outcome == apart.expected
    assert ran_here.message == ran_apart.message.replace(str(tmp_path / "apart"), str(tmp_path / "here"))


def test_an_exception_escaping_a_command_is_a_raw_traceback_in_process(tmp_path):
    case = Case("crash", "a command that dies", ["python", "-m", "x"], "clean_error", [tmp_path / "out"])

    def dies(args):
        (tmp_path / "out").write_text("half")
        raise ValueError("not a user error")

    result = run_in_process(case, dies, [])
    assert (result.outcome, result.partial_output) == ("raw_traceback", True)
    assert "ValueError: not a user error" in result.message


def stored(case) -> tuple[dict, dict]:
    """(settings, {annotation id: (keypoints (17, 3), bbox)}) of a case's output file."""
    with h5py.File(case.outputs[0], "r", locking=False) as f:
        ids = f["people/annotation_id"][:]
        people = {int(i): (k, b) for i, k, b in zip(ids, f["people/keypoints"][:], f["people/bbox"][:])}
        return json.loads(f.attrs["settings"]), people


def annotations_of(case) -> dict[int, dict]:
    path = case.argv[case.argv.index("--annotations") + 1]
    with open(path) as f:
        return {a["id"]: a for a in json.load(f)["annotations"]}


@pytest.mark.parametrize("name", ["keypoint_negative", "keypoint_outside_image", "bbox_zero_area"])
def test_legal_oddities_are_kept_as_given_and_train(corpus, name):
    """Keypoints outside the image and zero-area boxes are stored unchanged, and every sample built from the file
    is finite (a zero-area box is never a main person: the box height scales the sample)."""
    from simplepose.data.dataset import SimplePoseDataset

    case, _ = corpus[name]
    settings, people = stored(case)
    given = annotations_of(case)
    for ann_id, (keypoints, bbox) in people.items():
        np.testing.assert_allclose(keypoints.ravel(), given[ann_id]["keypoints"], rtol=1e-6)
        np.testing.assert_allclose(bbox, given[ann_id]["bbox"], rtol=1e-6)
    cfg = load_config(None, ["data.input_size=64"])
    ds = SimplePoseDataset(case.outputs[0], cfg, train=True)
    for i in range(len(ds)):
        item = ds[i]
        assert all(torch.isfinite(torch.as_tensor(t)).all() for t in (item["image"], *item["targets"], *item["masks"]))
    empty = [i for i, a in given.items() if a["bbox"][2] == 0]
    with h5py.File(case.outputs[0], "r", locking=False) as f:
        mains = set(f["people/annotation_id"][:][f["samples/person"][:]].tolist())
    assert not mains & set(empty)
    assert settings["counts"]["people_with_empty_box"] == len(empty)


def test_skips_are_listed_in_the_settings(corpus):
    settings, _ = stored(corpus["keypoints_wrong_count_skip_bad"][0])
    assert len(settings["skipped"]) == 1 and "'keypoints' must be 51 numbers" in settings["skipped"][0]["reason"]
    settings, _ = stored(corpus["images_without_people"][0])
    assert settings["counts"]["images_without_main_person"] == 2
    assert settings["counts"]["images_in_annotations"] == settings["counts"]["images"] + 2


def test_every_skip_is_documented_in_the_help():
    text = subprocess.run(
        [sys.executable, "-m", "data.coco_to_hdf5", "--help"], cwd=REPO_ROOT, capture_output=True, text=True
    ).stdout
    text = " ".join(text.split())
    for phrase in ("images without a main person", "zero-area box", "corrupt annotations", "missing or corrupt images"):
        assert phrase in text, phrase
