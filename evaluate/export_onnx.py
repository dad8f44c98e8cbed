"""Export the network to ONNX: image (B, 3, H, W) -> maps (B, 50, H/4, W/4), batch, height and width dynamic.

    python -m evaluate.export_onnx --ckpt runs/x/best.pt --out simplepose.onnx [--input-size 384x512] [key=value ...]

Input "image": float32 BGR/255, NCHW, height and width multiples of 64 (the evaluator pads every resized scale to
such a size, so inputs are padded and rarely square). Output "maps": the last stack's finest output, float32, what
the test-time path uses. Grouping stays in Python: ``evaluate.runtime.onnx_runner.load_onnx`` runs the file with ONNX
Runtime through the same multi-scale + flip path and decoder. The file's metadata carries the run's config (with
the ``key=value`` overrides given here) and, when the checkpoint has one, its skeleton definition, so the .onnx
file alone is enough. When onnxruntime is installed the file is run at the example size and at a second
non-square size with another batch, and compared with PyTorch (max abs difference, tolerance 1e-4).
"""

from __future__ import annotations

import argparse
import io
import json
import warnings
from collections.abc import Mapping
from importlib.util import find_spec
from pathlib import Path

import onnx
import torch
from torch import nn

from config.config_file import add_config_arguments, to_dict
from config.schema import Config
from config.skeleton import Skeleton
from evaluate.runtime.model_loader import load_model
from evaluate.runtime.onnx_runner import CONFIG_KEY, INPUT_NAME, OUTPUT_NAME, SKELETON_KEY, OnnxPredictor, open_session
from models.posenet import SIZE_MULTIPLE, check_input_shape
from utils.errors import UserError, cli_main
from utils.io import atomic_write_bytes, refuse_to_overwrite

TOLERANCE = 1e-4
DEFAULT_INPUT_SIZE = (384, 512)  # (height, width) of the traced example: non-square, as the evaluator's inputs


class FinestOutput(nn.Module):
    """Wraps a model returning outputs[stack][scale] so that it returns only outputs[-1][0], as float32."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.model(image)[-1][0].float()


def example_input(height: int, width: int, batch: int = 1, seed: int = 0) -> torch.Tensor:
    """A reproducible random (batch, 3, height, width) float32 input in [0, 1)."""
    return torch.rand(batch, 3, height, width, generator=torch.Generator().manual_seed(seed))


def check_inputs(height: int, width: int) -> list[torch.Tensor]:
    """The inputs the export is checked on: the traced example's size (batch 1) and a batch of 2 at another
    non-square size (height and width swapped; a square example gets 64 more columns), so that a batch, height or
    width frozen into the graph would show."""
    other = (width, height) if height != width else (height, width + SIZE_MULTIPLE)
    return [example_input(height, width), example_input(*other, batch=2, seed=1)]


def export_metadata(cfg: Config, skeleton: Skeleton | None = None) -> dict[str, str]:
    """The metadata_props an export carries: the run's config and the model's skeleton definition, as JSON."""
    out = {CONFIG_KEY: json.dumps(to_dict(cfg))}
    if skeleton is not None:
        out[SKELETON_KEY] = json.dumps(skeleton.to_dict())
    return out


def export_onnx(
    model: nn.Module,
    out: str | Path,
    input_hw: tuple[int, int] = DEFAULT_INPUT_SIZE,
    opset: int = 17,
    metadata: Mapping[str, str] | None = None,
) -> torch.Tensor:
    """Write ``out`` atomically, with dynamic batch, height and width and ``metadata`` as metadata_props.

    Returns the example input it was traced with, (1, 3, H, W) for ``input_hw`` = (H, W).
    """
    check_input_shape((1, 3, *input_hw))
    example = example_input(*input_hw)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        # the TorchScript exporter's deprecation notice, and tracer warnings about the input-shape check (it only
        # raises on bad sizes; the sizes themselves stay dynamic, see check_inputs)
        warnings.simplefilter("ignore")
        torch.onnx.export(
            FinestOutput(model).eval(),
            (example,),
            buffer,
            dynamo=False,
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_axes={
                INPUT_NAME: {0: "batch", 2: "height", 3: "width"},
                OUTPUT_NAME: {0: "batch", 2: "rows", 3: "cols"},
            },
            opset_version=opset,
        )
    graph = onnx.load_model_from_string(buffer.getvalue())
    if metadata:
        onnx.helper.set_model_props(graph, dict(metadata))
    atomic_write_bytes(out, graph.SerializeToString())
    return example


def compare_with_onnxruntime(model: nn.Module, onnx_path: str | Path, inputs: list[torch.Tensor]) -> float | None:
    """Max abs difference between PyTorch and onnxruntime (CPU) over ``inputs``; None without onnxruntime.
    A different output shape is a UserError."""
    if find_spec("onnxruntime") is None:
        return None
    run = OnnxPredictor(open_session(onnx_path))
    wrapped = FinestOutput(model).eval()
    worst = 0.0
    for x in inputs:
        with torch.no_grad():
            expected = wrapped(x)
        got = run(x)
        if got.shape != expected.shape:
            raise UserError(
                f"onnxruntime gives maps of shape {tuple(got.shape)} for an input of {tuple(x.shape)}, PyTorch "
                f"{tuple(expected.shape)}: the exported graph does not take this size"
            )
        worst = max(worst, float((got - expected).abs().max()))
    return worst


def input_size(text: str) -> tuple[int, int]:
    """``--input-size HxW`` (or one side S: square) as (H, W)."""
    parts = text.lower().split("x")
    if len(parts) > 2 or not all(p.strip().isdigit() for p in parts):
        raise UserError(f"--input-size takes HEIGHTxWIDTH (e.g. 384x512) or one side, got {text!r}")
    return int(parts[0]), int(parts[-1])


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evaluate.export_onnx", description=__doc__.split("\n\n")[0])
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
    args = p.parse_args(argv)
    height, width = input_size(args.input_size)
    inputs = check_inputs(height, width)
    for x in inputs:
        check_input_shape(tuple(x.shape))  # before loading anything
    if not args.overwrite:
        refuse_to_overwrite([Path(args.out)])

    model, cfg = load_model(args.ckpt, args.config, args.overrides, torch.device("cpu"))
    skeleton = model.skeleton
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
