"""Plain helpers shared by several test modules (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

import numpy as np
import torch

from simplepose.checkpoint.format import Checkpoint
from simplepose.codec.layout import ChannelLayout
from simplepose.config.config_file import load_config
from simplepose.config.schema import Config, ModelConfig
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.batching import collate, images_to_float
from simplepose.data.dataset import SimplePoseDataset
from simplepose.engine.checkpointer import TrainState
from simplepose.engine.logger import read_metrics
from simplepose.engine.trainer import Trainer
from simplepose.evaluate.inference.oracle import OracleSource
from simplepose.evaluate.metrics.people_agreement import people_agreement  # noqa: F401  (the tests import it from here)
from simplepose.models import build_loss, build_model
from tests.paths import COCO_SAMPLE_ANNOTATIONS, REPO_ROOT, TINY_PRESET

COCO = load_skeleton("coco")  # the paper's skeleton: the tests written against its channel layout use it
COCO_LAYOUT = ChannelLayout.of(COCO)  # its channels: limbs 0-29, keypoints 30-47, person mask 48, max keypoint 49

# The synthetic sample (the conftest's synthetic_sample): as many pictures as the real sample, twice the generator's
# share of crowd regions (so that the sample holds several), crowds written as COCO's files write them.
SYNTHETIC_SAMPLE = {"num_images": 27, "seed": 0, "crowd_probability": 0.3, "crowd_counts": "uncompressed"}


def make_synthetic_sample(out: Path) -> Path:
    """Generate the synthetic sample in ``out`` (``images/``, ``annotations/person_keypoints_sample.json``), laid
    out like the real COCO sample; returns ``out``."""
    from simplepose.data.synthetic_images import generate

    generate(out, val_fraction=0, **SYNTHETIC_SAMPLE)
    (out / "annotations" / "person_keypoints_train.json").replace(out / COCO_SAMPLE_ANNOTATIONS)
    (out / "annotations" / "person_keypoints_val.json").unlink()  # no validation split
    return out


def tiny_cfg(h5, out_dir, *extra: str) -> Config:
    """The tiny preset training on ``h5`` (built for input size 64) into ``out_dir``, with ``key=value`` extras."""
    return load_config(TINY_PRESET, [f"data.train={h5}", f"train.out_dir={out_dir}", *extra])


def run_args(preset: str | Path, train_h5: str | Path, out_dir: str | Path, *extra: str) -> list[str]:
    """Command-line arguments of a training run of ``preset`` on ``train_h5``, writing to ``out_dir``; ``extra``
    are further ``key=value`` overrides."""
    return ["--config", str(preset), f"data.train={train_h5}", f"train.out_dir={out_dir}", *extra]


def tiny_run_args(train_h5: str | Path, out_dir: str | Path, *extra: str) -> list[str]:
    """``run_args`` of the tiny preset (``train_h5`` built for input size 64)."""
    return run_args(TINY_PRESET, train_h5, out_dir, *extra)


def torchrun_command(program: list[str], nproc: int, max_restarts: int = 0) -> list[str]:
    """The command line that starts ``nproc`` copies of ``program`` (``["train_distributed.py", *args]`` or
    ``["-m", "evaluate.coco_eval", *args]``) on this machine under torchrun (``python -m torch.distributed.run``,
    on a free local port), restarting the group up to ``max_restarts`` times."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
            f"--max-restarts={max_restarts}", f"--master_port={port}", *program]  # fmt: skip


# A person facing the camera, (dx, dy) from the top of the head, internal keypoint order, input pixels.
TEMPLATE = np.array([
    (0, 20), (0, 45), (-25, 45), (-35, 80), (-40, 115), (25, 45), (35, 80), (40, 115),
    (-15, 120), (-17, 165), (-18, 210), (15, 120), (17, 165), (18, 210),
    (-6, 14), (6, 14), (-12, 18), (12, 18),
], np.float64)  # fmt: skip


def person(x: float, y: float, **moved) -> np.ndarray:
    """(18, 3) internal keypoints of a person whose head top is at (x, y); ``moved`` overrides joints."""
    kp = np.zeros((18, 3))
    kp[:, :2] = TEMPLATE + (x, y)
    kp[:, 2] = 1
    for name, xy in moved.items():
        kp[COCO.keypoints.index(name), :2] = xy
    return kp


def assert_ends_as_expected(case, result) -> None:
    """A bad-input case (tests.harness.cases.Case) ended as it should: no traceback, no partial output, the expected
    outcome, a message naming everything in ``case.names``, and never PyTorch's advice to load a file unsafely."""
    from tests.harness.not_checkpoints import UNSAFE_ADVICE

    assert result.outcome != "raw_traceback", result.message
    assert not [advice for advice in UNSAFE_ADVICE if advice in result.message], result.message
    assert not result.partial_output, f"{case.outputs} or a temporary file left behind"
    assert result.outcome == case.expected, result.message
    for word in case.names:
        assert word in result.message, f"the message should name {word!r}: {result.message}"


def flat_optimizer_state(opt_state: dict) -> list[torch.Tensor]:
    return [v for s in opt_state["state"].values() for v in s.values() if torch.is_tensor(v)]


def subprocess_env(**extra: str) -> dict[str, str]:
    """This process's environment for a subprocess that imports the repository: the repository root put in front
    of PYTHONPATH (kept, not replaced: packages installed there, e.g. with pip --target, must stay importable),
    plus ``extra``."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


# A 2-stack network of 16 channels: random-weight checkpoints for the test-time commands.
TINY_MODEL = ModelConfig(stacks=2, inp_dim=16, increase=8, num_scales=5, head_channels=16, se_reduction=4)


def channel_names(skeleton: Skeleton) -> list[str]:
    """A readable name per output channel, e.g. ``limb:neck-nose``, ``keypoint:nose``, in channel order."""
    names = [f"limb:{skeleton.keypoints[a]}-{skeleton.keypoints[b]}" for a, b in skeleton.limbs]
    return names + [f"keypoint:{n}" for n in skeleton.keypoints] + ["person_mask", "max_keypoint"]


def internal_to_dataset(skeleton: Skeleton) -> tuple[int, ...]:
    """Dataset index of each internal keypoint, -1 for a derived one."""
    return tuple(skeleton.dataset_keypoints.index(n) if n in skeleton.dataset_keypoints else -1
                 for n in skeleton.keypoints)  # fmt: skip


def left_right_pairs(skeleton: Skeleton) -> tuple[tuple[int, int], ...]:
    """The flip pairs as internal (first, second) indices."""
    return tuple((skeleton.keypoints.index(a), skeleton.keypoints.index(b)) for a, b in skeleton.flip_pairs)


def saved_state(checkpoint: Checkpoint | str | Path) -> TrainState:
    """The training state of a checkpoint (a loaded one or its file), as a resumed run reads it."""
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else Checkpoint.load(checkpoint)
    state = TrainState.of(ckpt)
    assert state is not None, f"{ckpt.file} holds weights only"
    return state


def save_tiny_checkpoint(path: Path, model: torch.nn.Module, cfg: Config) -> Path:
    """``model``'s weights with ``cfg`` and its skeleton, written by the checkpoint format's own writer (weights
    only, as ``train.init_weights`` or evaluation read them)."""
    Checkpoint(model.state_dict(), cfg, model.skeleton).save(path)
    return path


def tiny_model_cfg() -> Config:
    cfg = Config()
    cfg.model = TINY_MODEL
    cfg.loss.stack_weights = [1.0, 1.0]
    return cfg


def tiny_model(seed: int = 0) -> torch.nn.Module:
    """``TINY_MODEL`` in eval mode with random weights N(0, 0.1): outputs far from 0, reproducible by seed."""
    torch.manual_seed(seed)
    model = build_model(tiny_model_cfg())
    with torch.no_grad():  # random weights large enough for outputs far from 0
        for p in model.parameters():
            p.normal_(0.0, 0.1)
    return model.eval()


def briefly_trained_model(cfg: Config, h5, steps: int = 40, samples: int = 4) -> torch.nn.Module:
    """A model of ``cfg`` fitted ``steps`` Adam steps (lr 1e-2) to the first ``samples`` samples of ``h5``, in eval
    mode: too little to be accurate, enough for maps with people-like peaks on the pictures (random weights give
    flat maps: no people, or every pixel a peak)."""
    dataset = SimplePoseDataset(h5, cfg, train=False)
    batch = collate([dataset[i] for i in range(samples)])
    torch.manual_seed(0)
    model, loss_fn = build_model(cfg).train(), build_loss(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    images = images_to_float(batch["image"])
    for _ in range(steps):
        total, _ = loss_fn(model(images), batch["targets"], batch["masks"])
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        optimizer.step()
    return model.eval()


# Pictures of the synthetic sample (SYNTHETIC_SAMPLE) on which the briefly trained model of the conftest's
# trained_tiny_ckpt finds people of many keypoints (and some of a few), in three shapes (rows x cols): 320 x 371,
# 382 x 266 (portrait) and 256 x 302 (the smallest).
LANDSCAPE, PORTRAIT, SMALL = "000000000004.jpg", "000000000003.jpg", "000000000018.jpg"
# more of the synthetic sample's pictures, for the tests that compare two ways of finding people: how many people the
# briefly trained model finds on the three above depends on the CPU's rounding of its training (10 with the kernels
# held back to AVX2), and a comparison needs enough of them (``assert_people_agree``'s ``min_people``)
MORE_PEOPLE = ("000000000005.jpg", "000000000006.jpg", "000000000007.jpg", "000000000009.jpg")
# the pictures such a comparison runs on: three padded input shapes per scale, and enough people
AGREEMENT_IMAGES = (LANDSCAPE, PORTRAIT, SMALL, *MORE_PEOPLE)
UNSCORED_IMAGES = (LANDSCAPE, "000000000009.jpg")  # two pictures for the results of unannotated folders


def image_id(file_name: str) -> int:
    """The image id of a COCO-style file name (the number it is made of)."""
    return int(file_name.split(".")[0])


def image_folder(images, folder, names=UNSCORED_IMAGES, renamed=None):
    """``folder`` made and filled with copies of the pictures ``names`` of ``images`` (under new names when
    ``renamed`` is given)."""
    folder.mkdir()
    for name, new in zip(names, renamed or names):
        shutil.copy(images / name, folder / new)
    return folder


# A short training run of the tiny preset on a skeleton's synthetic set (the loss falls within it).
SHORT_RUN = ("train.epochs=2", "train.max_steps_per_epoch=6", "train.optimizer=adam", "train.lr=5e-3")
# an hardly trained network's maps are faint: these thresholds still turn them into people to write
FAINT_MAPS = ("eval.peak_threshold=0.02", "eval.limb_threshold=0.02", "eval.min_mean_score=0")


def train_a_few_steps(h5, run, *extra: str) -> list[dict]:
    """The tiny model trained 12 steps with Adam (seconds on a CPU); its metrics records."""
    Trainer(tiny_cfg(h5, run, *SHORT_RUN, *extra)).fit()
    return read_metrics(run)


def assert_the_loss_fell(records: list[dict]) -> None:
    first = next(r["loss"] for r in records if r["kind"] == "train")
    last_epoch = [r["train_loss"] for r in records if r["kind"] == "epoch"][-1]
    assert last_epoch < 0.75 * first, f"loss went from {first:.3f} (first step) to {last_epoch:.3f} (last epoch)"


def imperfect_results(data: dict, seed: int = 0) -> list[dict]:
    """Detections of the labelled people with keypoint noise (a few % of the person's size), random scores, some
    people missed and some false detections: figures well inside (0, 1), sensitive to any matching error."""
    rng = np.random.default_rng(seed)
    out = []
    for ann in data["annotations"]:
        if ann.get("iscrowd") or ann.get("num_keypoints", 0) == 0 or rng.random() < 0.15:
            continue
        kp = np.array(ann["keypoints"], np.float64).reshape(-1, 3)
        size = max(ann["bbox"][2], ann["bbox"][3])
        kp[:, :2] += rng.normal(0, rng.uniform(0.002, 0.03) * size, (len(kp), 2))
        kp[:, 2] = 1
        out.append({"image_id": ann["image_id"], "category_id": ann["category_id"], "score": float(rng.random()),
                    "keypoints": kp.reshape(-1).round(2).tolist()})  # fmt: skip
        if rng.random() < 0.2:  # a false detection beside it
            kp[:, :2] += size * 0.6
            out.append({**out[-1], "score": float(rng.random()), "keypoints": kp.reshape(-1).round(2).tolist()})
    return out


def pycocotools_coco(path: str | Path):
    """pycocotools' ``COCO`` of an annotation file as pycocotools reads it (unchecked, quiet): for ``loadRes``."""
    import contextlib
    import io

    from pycocotools.coco import COCO

    with contextlib.redirect_stdout(io.StringIO()):
        return COCO(str(path))


def pycocotools_stats(data: dict, results: list[dict], sigmas) -> list[float]:
    """pycocotools' own ten keypoint figures of ``results`` on the annotation file ``data`` as it is (its ids too)."""
    import contextlib
    import io

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = data
        gt.createIndex()
        ev = COCOeval(gt, gt.loadRes(results), "keypoints")
        ev.params.kpt_oks_sigmas = np.array(sigmas)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return [float(v) for v in ev.stats]


class InterruptedCamera:
    """Stand-in for cv2.VideoCapture(index): gives ``frames`` then raises KeyboardInterrupt, as Ctrl-C would."""

    def __init__(self, frames):
        self.frames = list(frames)
        self.released = False

    def isOpened(self):  # noqa: N802 (OpenCV's name)
        return True

    def get(self, prop):
        return 0.0  # cameras often report no fps and no frame count

    def read(self):
        if not self.frames:
            raise KeyboardInterrupt
        return True, self.frames.pop(0)

    def release(self):
        self.released = True


def assert_people_agree(agreements: list[dict[str, float]], min_people: int = 20) -> None:
    """What two decodings of maps equal within float tolerance guarantee, over several images (``people_agreement``
    of each): at least 90 % of the people matched by OKS on both sides, 90 % of their shared keypoints within 1 px and
    at most 5 % found on one side only. Not exact
    equality: the decoder's greedy choices (a peak, a limb, a merge) can flip on a near tie, as the maps of two
    kernel libraries, or two CPUs, differ in their last bits; a flipped choice moves one keypoint or splits a person."""
    total = {k: sum(a[k] for a in agreements) for k in agreements[0]}
    assert total["want"] >= min_people, total  # people were compared, not empty lists
    assert total["matched"] >= 0.9 * max(total["got"], total["want"]), total
    assert total["within_1px"] >= 0.9 * total["shared"] and total["one_side"] <= 0.05 * total["shared"], total


def score_array(people) -> np.ndarray:
    """(P,) float64 person scores of decoded people."""
    return np.array([p.score for p in people], np.float64)


def keypoints_oracle(keypoints: np.ndarray, targets, skeleton: Skeleton) -> OracleSource:
    """The oracle of the people ``keypoints`` (P, K, 3 internal layout, image pixels) in every image it is given."""
    return OracleSource(lambda key: keypoints, targets, skeleton)
