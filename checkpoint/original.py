"""Convert the original Simple Pose checkpoint (e.g. PoseNet_52_epoch.pth) to a SimplePose weights file.

    simplepose convert-weights --weights PoseNet_52_epoch.pth --out simplepose_original.pt

The output is an ``checkpoint.format.Checkpoint`` of weights only: the state dict in our names (float32), the whole
config with the model section read off the weights, COCO's skeleton and the original file as its ``origin``, written
atomically; the evaluator rebuilds the model from it alone. The conversion is checked by a strict load.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from simplepose.checkpoint.format import Checkpoint, CheckpointError
from simplepose.config.config_file import with_overrides
from simplepose.config.schema import Config
from simplepose.config.skeleton_file import load_skeleton
from simplepose.models.posenet import PoseNet
from simplepose.models.weights import infer_model_config, model_section_overrides
from simplepose.utils.code_version import code_version
from simplepose.utils.commands import command, commands_here
from simplepose.utils.errors import cli_main
from simplepose.utils.io import refuse_to_overwrite


def convert(weights_path: str | Path) -> tuple[Checkpoint, Config]:
    """Read an original checkpoint; (our checkpoint of its weights, the config they fit)."""
    original = Checkpoint.load(weights_path)
    if original.stored_as != "original":
        raise CheckpointError(
            f"{weights_path} is not an original Simple Pose checkpoint (no 'posenet.' keys)",
            file=weights_path,
            key="weights",
        )
    cfg = Config()
    cfg = with_overrides(cfg, model_section_overrides(cfg, infer_model_config(original.model)), str(weights_path))
    state = {k: v.float() if v.is_floating_point() else v for k, v in original.model.items()}
    skeleton = load_skeleton("coco")  # the original was trained on COCO's keypoints, in this channel order
    converted = Checkpoint(
        state, config=cfg, skeleton=skeleton, code_version=code_version(), origin=f"original:{Path(weights_path).name}"
    )
    with torch.device("meta"):
        model = PoseNet(cfg.model, skeleton)
    converted.load_into(model.to_empty(device="cpu"), strict=True)
    return converted, cfg


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=command("checkpoint.original"), description=commands_here(__doc__.split("\n")[0])
    )
    parser.add_argument("--weights", required=True, help="the original checkpoint, e.g. PoseNet_52_epoch.pth")
    parser.add_argument("--out", required=True, help="SimplePose weights file to write, e.g. simplepose_original.pt")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    return parser


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.overwrite:
        refuse_to_overwrite([Path(args.out)])
    converted, cfg = convert(args.weights)
    converted.save(args.out)
    m = cfg.model
    n = sum(v.numel() for k, v in converted.model.items() if "running_" not in k and "num_batches" not in k)
    print(
        f"wrote {args.out}: {len(converted.model)} tensors, {n:,} parameters, model.stacks={m.stacks} "
        f"model.inp_dim={m.inp_dim} model.increase={m.increase} model.num_scales={m.num_scales}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
