"""Convert the original Simple Pose checkpoint (e.g. PoseNet_52_epoch.pth) to a SimplePose weights file.

    python -m models.convert_original --weights PoseNet_52_epoch.pth --out simplepose_original.pt

The output is ``{"model": state dict (our names, float32), "config": whole config with the model section
read off the weights, "skeleton": COCO's definition, "source": ..., "version": 1}``, written atomically;
``load_weights`` and the evaluator rebuild the model from its ``config``. The conversion is checked by a strict load.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from config.loader import to_dict, with_overrides
from config.schema import Config
from config.skeleton import load_skeleton
from models.posenet import PoseNet
from models.weights import extract_weights, infer_model_config, load_weights, model_section_overrides, read_checkpoint
from utils.errors import UserError, cli_main
from utils.io import atomic_write

CONVERTED_WEIGHTS_FORMAT_VERSION = 1


def convert(weights_path: str | Path) -> dict:
    """Read an original checkpoint and return our checkpoint dict (model weights + config)."""
    weights = extract_weights(read_checkpoint(weights_path), str(weights_path))
    if weights.source != "original":
        raise UserError(f"{weights_path} is not an original Simple Pose checkpoint (no 'posenet.' keys)")
    cfg = Config()
    cfg = with_overrides(cfg, model_section_overrides(cfg, infer_model_config(weights.state)), str(weights_path))
    state = {k: v.float() if v.is_floating_point() else v for k, v in weights.state.items()}
    skeleton = load_skeleton("coco")  # the original was trained on COCO's keypoints, in this channel order
    with torch.device("meta"):
        model = PoseNet(cfg.model, skeleton)
    model = model.to_empty(device="cpu")
    load_weights(model, {"model": state}, strict=True)
    return {"model": state, "config": to_dict(cfg), "skeleton": skeleton.to_dict(),
            "source": f"original:{Path(weights_path).name}", "version": CONVERTED_WEIGHTS_FORMAT_VERSION}  # fmt: skip


@cli_main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.convert_original", description=__doc__.split("\n")[0])
    parser.add_argument("--weights", required=True, help="the original checkpoint, e.g. PoseNet_52_epoch.pth")
    parser.add_argument("--out", required=True, help="SimplePose weights file to write, e.g. simplepose_original.pt")
    args = parser.parse_args(argv)
    ckpt = convert(args.weights)
    atomic_write(args.out, lambda f: torch.save(ckpt, f))
    m = ckpt["config"]["model"]
    n = sum(v.numel() for k, v in ckpt["model"].items() if "running_" not in k and "num_batches" not in k)
    print(
        f"wrote {args.out}: {len(ckpt['model'])} tensors, {n:,} parameters, model.stacks={m['stacks']} "
        f"model.inp_dim={m['inp_dim']} model.increase={m['increase']} model.num_scales={m['num_scales']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
