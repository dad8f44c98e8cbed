"""Export the network to ONNX: image (B, 3, H, W) -> maps (B, 50, H/4, W/4), batch, height and width dynamic.

    simplepose export --ckpt runs/x/best.pt --out simplepose.onnx [--input-size 384x512] [key=value ...]

A short command over evaluate/inference/onnx_export.py. Input "image": float32 BGR/255, NCHW, height and width multiples
of 64 (the evaluator pads every resized scale to such a size, so inputs are padded and rarely square). Output "maps":
the last stack's finest output, float32, what the test-time path uses. Grouping stays in Python:
``evaluate.inference.onnx_runner.load_onnx`` runs the file with ONNX Runtime through the same multi-scale + flip path
and decoder. The file's metadata carries the run's config (with the ``key=value`` overrides given here) and, when the
checkpoint has one, its skeleton definition, so the .onnx file alone is enough. When onnxruntime is installed the file
is run at the example size and at a second non-square size with another batch, and compared with PyTorch (max abs
difference, tolerance 1e-4).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from simplepose.codec.network_input import check_input_shape
from simplepose.config.config_file import add_config_arguments
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.evaluate.inference.onnx_export import (
    DEFAULT_INPUT_SIZE,
    TOLERANCE,
    check_inputs,
    compare_with_onnxruntime,
    export_metadata,
    export_onnx,
)
from simplepose.evaluate.inference.onnx_session import INPUT_NAME, OUTPUT_NAME
from simplepose.models.weights import carried_skeleton
from simplepose.utils.commands import command, commands_here
from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.io import refuse_to_overwrite


def input_size(text: str) -> tuple[int, int]:
    """``--input-size HxW`` (or one side S: square) as (H, W)."""
    parts = text.lower().split("x")
    if len(parts) > 2 or not all(p.strip().isdigit() for p in parts):
        raise UserError(f"--input-size takes HEIGHTxWIDTH (e.g. 384x512) or one side, got {text!r}")
    return int(parts[0]), int(parts[-1])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=command("evaluate.export_onnx"), description=commands_here(__doc__.split("\n\n")[0])
    )
    p.add_argument("--ckpt", required=True)
    p.add_argument("--out", required=True, help="ONNX file to write (an existing one: with --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument(
        "--input-size",
        default="x".join(map(str, DEFAULT_INPUT_SIZE)),
        metavar="HxW",
        help="example input HEIGHTxWIDTH, multiples of 64 (one number: square); the export takes any size",
    )
    p.add_argument("--opset", type=int, default=17)
    add_config_arguments(p)
    return p


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if Path(args.out).suffix.lower() != ".onnx":
        raise UserError(
            f"--out {args.out}: an ONNX file is named *.onnx: e.g. --out {Path(args.out).with_suffix('.onnx')}"
        )
    height, width = input_size(args.input_size)
    inputs = check_inputs(height, width)
    for x in inputs:
        check_input_shape(tuple(x.shape))  # before loading anything
    if not args.overwrite:
        refuse_to_overwrite([Path(args.out)])

    model, cfg = load_model(args.ckpt, args.config, args.overrides, torch.device("cpu"))
    skeleton = carried_skeleton(model)
    export_onnx(model, args.out, (height, width), args.opset, export_metadata(cfg, skeleton))
    print(
        f"wrote {args.out}: input {INPUT_NAME} (batch, 3, height, width), output {OUTPUT_NAME} (batch, "
        f"{skeleton.num_channels}, height/4, width/4), dynamic sizes (traced at {height}x{width}); metadata: config, "
        f"skeleton {skeleton.name}"
    )
    diff = compare_with_onnxruntime(model, args.out, inputs)
    sizes = " and ".join(f"{tuple(x.shape)}" for x in inputs)
    if diff is None:
        print("onnxruntime not installed: output check skipped")
    elif diff > TOLERANCE:
        raise UserError(f"onnxruntime output differs from PyTorch by {diff:.2e} (> {TOLERANCE:g}) at {sizes}")
    else:
        print(f"onnxruntime matches PyTorch at {sizes}: max abs difference {diff:.2e} (tolerance {TOLERANCE:g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
