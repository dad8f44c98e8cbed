"""A tiny model fits two samples that come through the data pipeline (HDF5 -> dataset -> loss), of the synthetic
sample and of the real one."""

import subprocess
import sys

import torch

from simplepose.config.config_file import load_config
from simplepose.data.batching import collate, images_to_float
from simplepose.data.dataset import SimplePoseDataset
from simplepose.models import build_loss, build_model
from tests.paths import REPO_ROOT


def test_tiny_model_lowers_the_loss_tenfold_on_two_samples(tmp_path, sample_images, sample_annotations, one_thread):
    h5 = tmp_path / "sample128.h5"
    subprocess.run(
        [sys.executable, "-m", "data.coco_to_hdf5", "--images", str(sample_images), "--annotations",
         str(sample_annotations), "--out", str(h5), "--input-size", "128", "--no-progress"],
        check=True, cwd=REPO_ROOT, capture_output=True,
    )  # fmt: skip
    cfg = load_config(None, ["data.input_size=128", "model.stacks=2", "model.inp_dim=32", "model.increase=16",
                             "model.head_channels=32", "model.se_reduction=4", "loss.stack_weights=[1,1]"])  # fmt: skip
    dataset = SimplePoseDataset(h5, cfg, train=False)
    batch = collate([dataset[0], dataset[1]])
    assert batch["image"].shape == (2, 3, 128, 128) and batch["targets"][0].shape == (2, 50, 32, 32)
    assert batch["targets"][0][:, 30:48].amax() > 0.5  # people with keypoints

    torch.manual_seed(0)
    model, loss_fn = build_model(cfg).train(), build_loss(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(80):
        total, breakdown = loss_fn(model(images_to_float(batch["image"])), batch["targets"], batch["masks"])
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        optimizer.step()
        losses.append(total.item())
    assert losses[0] > 1.0 and all(torch.isfinite(v).all() for v in breakdown.values())
    assert losses[-1] < losses[0] / 10, f"loss went from {losses[0]:.3f} to {losses[-1]:.3f}"
