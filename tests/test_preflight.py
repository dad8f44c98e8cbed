"""Checks before the first step (engine/preflight.py): everything a run will read is opened before it trains or
writes; a problem is one line naming the setting and the path, exit 2, and no run folder; every rank of a group
agrees (utils.distributed.agreed); evaluate.coco_eval checks its inputs and outputs' folders before its first
image."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch.multiprocessing as mp

from simplepose import train
from simplepose.engine.trainer import Trainer
from simplepose.evaluate import coco_eval, evaluation
from tests.helpers import save_tiny_checkpoint, tiny_model, tiny_model_cfg, tiny_run_args

VALIDATE = ["train.val_every=1", "train.max_steps_per_epoch=1"]


def failed_start(argv: list[str], capsys, monkeypatch) -> str:
    """Run train.py with ``argv``: it must stop with exit 2 and one ``error:`` line before the trainer starts (a
    ``Trainer.fit`` that is reached fails the test); that line."""

    def no_fit(self):
        raise AssertionError("the run reached Trainer.fit: the problem was not found before the first step")

    monkeypatch.setattr(Trainer, "fit", no_fit)
    rc = train.main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err[-2000:]
    return lines[0]


def images_without_one(images: Path, folder: Path, annotations: Path) -> tuple[Path, str]:
    """A copy of ``images`` lacking the first image ``annotations`` lists: (the folder, that file's name)."""
    shutil.copytree(images, folder)
    name = json.loads(annotations.read_text())["images"][0]["file_name"]
    (folder / name).unlink()
    return folder, name


@pytest.mark.parametrize("case", ["val_annotations", "val_images", "image_missing", "half_pair", "init_weights",
                                  "resume", "source_val_annotations"])  # fmt: skip
def test_a_bad_validation_or_checkpoint_path_stops_the_start_naming_it(
    case, synthetic_h5_64, synthetic_sample_images, synthetic_sample_annotations, tmp_path, capsys, monkeypatch
):
    """Each input found missing or unreadable at the start (before, a missing validation file was found after the
    first epoch, and its folder refused the corrected command): the line names the setting and the path, and the
    run folder is not made."""
    images, annotations = synthetic_sample_images, synthetic_sample_annotations
    missing = tmp_path / "missing.json"
    not_a_checkpoint = tmp_path / "weights.pt"
    not_a_checkpoint.write_text("not a checkpoint")
    extra, names = {
        "val_annotations": ([f"data.val_images={images}", f"data.val_annotations={missing}"],
                            ["data.val_annotations", str(missing)]),
        "val_images": ([f"data.val_images={tmp_path / 'nope'}", f"data.val_annotations={annotations}"],
                       ["data.val_images", str(tmp_path / "nope")]),
        "half_pair": ([f"data.val_images={images}"], ["data.val_images", "data.val_annotations"]),
        "init_weights": ([f"train.init_weights={not_a_checkpoint}"], ["train.init_weights", str(not_a_checkpoint)]),
        "resume": ([f"train.resume={missing}"], ["train.resume", str(missing)]),
        "source_val_annotations": ([f"data.train_sources=[{synthetic_h5_64}]", f"data.source_val_images=[{images}]",
                                    f"data.source_val_annotations=[{missing}]"],
                                   ["data.source_val_annotations[0]", str(missing)]),
    }.get(case, (None, None))  # fmt: skip
    if case == "image_missing":
        folder, name = images_without_one(images, tmp_path / "images", annotations)
        extra = [f"data.val_images={folder}", f"data.val_annotations={annotations}"]
        names = ["data.val_images", str(folder / name), "1 image", "eval.skip_bad=true"]
    out = tmp_path / "run"
    line = failed_start(tiny_run_args(synthetic_h5_64, out, *VALIDATE, *extra), capsys, monkeypatch)
    assert all(n in line for n in names), line
    assert not out.exists()


def test_the_validation_annotations_read_at_the_start_are_the_ones_validated(
    synthetic_h5_64, synthetic_sample_images, synthetic_sample_annotations, tmp_path, capsys
):
    """The annotations are read once, at the start, and validation scores against that reading."""
    from simplepose.engine.trainer import Trainer
    from tests.helpers import tiny_cfg

    cfg = tiny_cfg(synthetic_h5_64, tmp_path, *VALIDATE, f"data.val_images={synthetic_sample_images}",
                   f"data.val_annotations={synthetic_sample_annotations}")  # fmt: skip
    trainer = Trainer(cfg)
    (truth,) = trainer.ground_truth.values()
    validator = next(h.validator for h in trainer.hooks.hooks if hasattr(h, "validator"))
    assert validator.ground_truth(validator.model, str(synthetic_sample_annotations)) is truth


def _agree(rank: int, world: int, init_file: str, failing: list[int], out: str) -> None:
    """One rank of a gloo group: ``agreed`` over a check that fails on the ranks ``failing``; writes what it raised."""
    import torch.distributed as dist

    from simplepose.utils import distributed as du
    from simplepose.utils.errors import UserError

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)

    def check() -> int:
        if rank in failing:
            raise UserError(f"data.val_annotations=/data/val.json: no such file (rank {rank})", key="x")
        return rank

    try:
        result = f"ok {du.agreed(check)}"
    except UserError as e:
        result = f"error: {e} [{e.key}]"
    dist.destroy_process_group()
    Path(out, f"rank{rank}").write_text(result)


@pytest.mark.parametrize("failing", [[1], [0, 1], []], ids=["one_rank", "every_rank", "none"])
def test_every_rank_takes_the_same_verdict(tmp_path, failing):
    """A file one rank cannot read (not on its node) stops every rank with the same line, which says which rank;
    none goes on to wait for the others."""
    mp.start_processes(_agree, args=(2, str(tmp_path / "init"), failing, str(tmp_path)), nprocs=2,
                       start_method="fork")  # fmt: skip
    results = [(tmp_path / f"rank{r}").read_text() for r in range(2)]
    if not failing:
        assert results == ["ok 0", "ok 1"]
        return
    assert results[0] == results[1], results
    first = failing[0]
    assert results[0].startswith(f"error: data.val_annotations=/data/val.json: no such file (rank {first})")
    assert ("on rank 1 of 2 processes only" in results[0]) == (failing == [1])
    assert results[0].endswith("[x]")


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    return save_tiny_checkpoint(tmp_path / "tiny.pt", tiny_model(), tiny_model_cfg())


@pytest.mark.parametrize("case", ["out_folder", "annotations", "images"])
def test_coco_eval_checks_its_inputs_and_outputs_before_the_first_image(
    case, checkpoint, synthetic_sample_images, synthetic_sample_annotations, tmp_path, capsys, monkeypatch
):
    """A results file that cannot be written (a file stands where its folder should be), a missing annotation file
    or image folder: one line naming it, before any image is evaluated (before, --out was found at the end)."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    args = {"images": str(synthetic_sample_images), "annotations": str(synthetic_sample_annotations),
            "out": str(tmp_path / "results.json")}  # fmt: skip
    named = {"out_folder": str(blocker), "annotations": str(tmp_path / "missing.json"), "images": str(tmp_path / "no")}
    args.update(out=str(blocker / "results.json")) if case == "out_folder" else args.update({case: named[case]})

    def evaluated(*args, **kwargs):
        raise AssertionError("the images were evaluated before the check")

    monkeypatch.setattr(evaluation, "evaluate_model", evaluated)  # coco_eval imports it where a network runs
    rc = coco_eval.main(["--ckpt", str(checkpoint), *(w for k, v in args.items() for w in (f"--{k}", v)), "--device",
                         "cpu", "eval.scales=[1.0]"])  # fmt: skip
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert rc == 2 and "Traceback" not in err and len(lines) == 1 and named[case] in lines[0], err[-2000:]
