"""Validation during training: the loss on ``data.val`` and COCO AP on ``data.val_images`` / ``data.val_annotations``
and on each training source's (``data.source_val_images`` / ``data.source_val_annotations``, figures named
``SOURCE/AP``, ...), sharded over the processes (every rank takes part, every rank receives the figures). The
annotations are read and checked once, before the first step (engine/preflight.py), and held for every evaluation
(``evaluate.metrics.annotations.GroundTruth``)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from simplepose.config.schema import Config, DataConfig
from simplepose.data.batching import batch_to_device, labelled_to_device
from simplepose.data.dataset import SimplePoseDataset
from simplepose.data.sources import source_names
from simplepose.engine.batches import make_loader
from simplepose.engine.logger import Meter
from simplepose.engine.sampler import EpochSampler
from simplepose.evaluate.evaluation import evaluate_model
from simplepose.evaluate.metrics.annotations import GroundTruth, load_ground_truth
from simplepose.models.eval_mode import eval_mode
from simplepose.models.weights import carried_skeleton, unwrap
from simplepose.utils import distributed as du
from simplepose.utils import stop_signals
from simplepose.utils.precision import Precision


def validation_sets(d: DataConfig) -> list[tuple[str, str, str]]:
    """(name, images, annotations) of each AP measured at validation: ``data.val_images`` (name "") and each source's
    (named as data.sources names the sources)."""
    sets = [("", d.val_images, d.val_annotations)] if d.val_images and d.val_annotations else []
    names = source_names(d.train_sources)
    for name, images, annotation_file in zip(names, d.source_val_images, d.source_val_annotations):
        if images and annotation_file:
            sets.append((name, images, annotation_file))
    return sets


def validation_due(epoch: int, every: int, epochs: int) -> bool:
    """Whether epoch ``epoch`` (0-based) is validated: every ``every`` epochs (``train.val_every``; 0: never) and
    after the last of ``epochs``."""
    return bool(every) and ((epoch + 1) % every == 0 or epoch + 1 == epochs)


class ValidationStopped(Exception):
    """Validation left on a stop signal (``signum``), of this process or of another of its group: by every rank at
    one point (``agreed``), or by this rank alone, within a batch (``StopAgreement``)."""

    def __init__(self, signum: int, agreed: bool = False) -> None:
        super().__init__(f"validation stopped by signal {signum}")
        self.signum, self.agreed = signum, agreed


def _stop_if_asked(module: nn.Module, args: object) -> None:
    """A forward pre-hook: ``ValidationStopped`` once a stop signal came (``utils.stop_signals.requested_in_group``)."""
    signum = stop_signals.requested_in_group()
    if signum:
        raise ValidationStopped(signum)


class StopAgreement:
    """Where the ranks leave a validation that a stop signal cuts short: one point for all, so that no rank waits in
    a collective for one that left. A rank leaves at its next forward pass (``_stop_if_asked``) and gives its stop
    to one exchange (``leave``); every rank takes part in one such exchange before each of validation's
    collectives (``before_collective``, through ``utils.distributed.before_collectives``): the rank that left meets
    the others there, at the collective they reached, and every rank stops at it. In one process: nothing."""

    def __init__(self) -> None:
        self.flags = du.AgreedFlags(1)

    def before_collective(self) -> None:
        (signum,) = self.flags.exchange([stop_signals.requested_in_group()], now=True)
        if signum:
            raise ValidationStopped(signum, agreed=True)

    def leave(self, stop: ValidationStopped) -> ValidationStopped:
        """The stop of this rank's own (``stop``) agreed with the others at the collective they are at."""
        if not stop.agreed:
            self.flags.exchange([stop.signum], now=True)
        return ValidationStopped(stop.signum, agreed=True)


def validation_metric(figures: dict[str, float]) -> float | None:
    """The figure best.pt follows: COCO AP, else minus the validation loss; None when neither was measured."""
    if "AP" in figures:
        return figures["AP"]
    return -figures["val_loss"] if "val_loss" in figures else None


class Validator:
    """Validation figures of a network being trained (``model`` possibly wrapped; ``loss`` its loss module)."""

    def __init__(
        self,
        cfg: Config,
        model: nn.Module,
        loss: nn.Module,
        val_set: SimplePoseDataset | None,
        device: torch.device,
        precision: Precision,
        rank: int,
        world_size: int,
        ground_truth: dict[str, GroundTruth] | None = None,
    ) -> None:
        self.cfg, self.model, self.loss, self.val_set, self.device = cfg, model, loss, val_set, device
        self.precision, self.rank, self.world_size = precision, rank, world_size
        self.sets = validation_sets(cfg.data)
        # by annotation file: read at the start (engine.preflight, given here), else at the first evaluation
        self._ground_truth: dict[str, GroundTruth] = dict(ground_truth or {})

    def ground_truth(self, model: nn.Module, annotation_file: str) -> GroundTruth:
        """``annotation_file`` read and checked for ``model``'s skeleton, once per run."""
        if annotation_file not in self._ground_truth:
            skeleton = carried_skeleton(model)
            self._ground_truth[annotation_file] = load_ground_truth(annotation_file, skeleton, self.cfg.eval)
        return self._ground_truth[annotation_file]

    @property
    def enabled(self) -> bool:
        return self.val_set is not None or bool(self.sets)

    @torch.no_grad()
    def validate(self, epoch: int) -> dict[str, float]:
        """``val_loss`` (when there is a validation file) and the COCO figures (``AP``, ``AP50``, ... when there are
        validation images; ``SOURCE/AP``, ... per source with its own, and then ``AP`` is their mean unless
        data.val_images gives it); rank 0 writes the results to ``train.out_dir/val_results_epoch{epoch}.json``
        (``..._SOURCE.json``) and, with ``eval.diagnose``, their diagnosis to ``train.out_dir/diagnosis_epoch{epoch}/``
        (``..._SOURCE/``)."""
        out: dict[str, float] = {}
        # training autotunes cuDNN (one batch shape); validation images come in many padded shapes, each of which
        # would be autotuned once more: heuristics there, the training's setting back after
        autotune = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = False
        # a stop signal ends validation at the next forward pass (ValidationStopped), every rank at one collective
        # (StopAgreement); the epoch's last.pt was written before
        stopping = unwrap(self.model).register_forward_pre_hook(_stop_if_asked)
        agreement = StopAgreement()
        try:
            with eval_mode(unwrap(self.model)) as model, du.before_collectives(agreement.before_collective):
                if self.val_set is not None:
                    out["val_loss"] = self.val_loss(model)
                for name, images, annotation_file in self.sets:
                    stats = self.average_precision(model, epoch, name, images, annotation_file)
                    out.update({f"{name}/{k}" if name else k: v for k, v in stats.items()})
                per_source = [out[f"{name}/AP"] for name, _, _ in self.sets if name]
                if "AP" not in out and per_source:
                    out["AP"] = sum(per_source) / len(per_source)
        except ValidationStopped as stop:
            raise agreement.leave(stop) from None
        finally:
            stopping.remove()
            torch.backends.cudnn.benchmark = autotune
        return out

    def average_precision(self, model: nn.Module, epoch: int, name: str, images: str, annotation_file: str) -> dict:
        """The COCO figures of one validation set (``name``: "" for data.val_images, else the source's)."""
        run = Path(self.cfg.train.out_dir)
        tail = f"_{name.replace('/', '_')}" if name else ""
        out_json = run / f"val_results_epoch{epoch}{tail}.json" if self.rank == 0 else None
        diagnose_dir = run / f"diagnosis_epoch{epoch}{tail}" if self.cfg.eval.diagnose else None
        stats, _ = evaluate_model(
            model,
            images,
            self.ground_truth(model, annotation_file),
            self.cfg,
            self.device,
            out_json=out_json,
            diagnose_dir=diagnose_dir,
        )
        return {k: float(v) for k, v in stats.items()}

    def val_loss(self, model: nn.Module) -> float:
        """Mean loss per sample over the validation file (each rank a strided share, averaged over the ranks)."""
        if self.val_set is None:
            raise ValueError("Validator.val_loss: no data.val file")
        sampler = EpochSampler(
            len(self.val_set), shuffle=False, rank=self.rank, world_size=self.world_size, batch_size=1
        )
        meter = Meter()
        for batch in make_loader(self.val_set, sampler, 1, self.cfg.data, self.device):
            images, targets, masks = batch_to_device(batch, self.device, self.cfg.train.channels_last)
            with self.precision.autocast(self.device):
                total, _ = self.loss(model(images), targets, masks, labelled_to_device(batch, self.device))
            meter.update(float(total.item()), images.shape[0])
        return du.all_reduce_mean(torch.tensor(meter.mean, device=self.device)).item()
