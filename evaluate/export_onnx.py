"""Export the network to ONNX (last stack, finest scale: (B, 50, S/4, S/4)), with a dynamic batch axis.

    python -m evaluate.export_onnx --ckpt runs/x/best.pt --out simplepose.onnx [--input-size 512]

Input: (B, 3, S, S) float32 BGR/255. Grouping stays in Python (evaluate/decode.py). When onnxruntime is
installed the exported file is run once and compared with PyTorch (max abs difference, tolerance 1e-4).
"""

from __future__ import annotations

import argparse
import io
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from config.loader import add_config_arguments
from evaluate.model_loader import load_model
from models.posenet import check_input_shape
from utils.errors import UserError, cli_main
from utils.io import atomic_write_bytes

TOLERANCE = 1e-4


class FinestOutput(nn.Module):
    """Wraps a model returning outputs[stack][scale] so that it returns only outputs[-1][0]."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.model(image)[-1][0]


def export_onnx(model: nn.Module, out: str | Path, input_size: int = 512, opset: int = 17) -> torch.Tensor:
    """Write ``out`` atomically; returns the example input used (1, 3, S, S)."""
    wrapped = FinestOutput(model).eval()
    example = torch.rand(1, 3, input_size, input_size, generator=torch.Generator().manual_seed(0))
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(
            wrapped,
            (example,),
            buffer,
            dynamo=False,
            input_names=["image"],
            output_names=["maps"],
            dynamic_axes={"image": {0: "batch"}, "maps": {0: "batch"}},
            opset_version=opset,
        )
    atomic_write_bytes(out, buffer.getvalue())
    return example


def compare_with_onnxruntime(model: nn.Module, onnx_path: str | Path, example: torch.Tensor) -> float | None:
    """Max abs difference between PyTorch and onnxruntime on ``example`` (batch 2); None without onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    batch = torch.cat([example, example.flip(-1)])
    with torch.no_grad():
        expected = FinestOutput(model).eval()(batch).float().numpy()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"image": batch.numpy()})[0]
    return float(np.abs(got - expected).max())


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evaluate.export_onnx", description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", required=True)
    p.add_argument("--out", required=True, help="ONNX file to write")
    p.add_argument("--input-size", type=int, default=512, help="square example input side (multiple of 64)")
    p.add_argument("--opset", type=int, default=17)
    add_config_arguments(p)
    args = p.parse_args(argv)

    check_input_shape((1, 3, args.input_size, args.input_size))  # before loading anything

    model, _ = load_model(args.ckpt, args.config, args.overrides, torch.device("cpu"))
    example = export_onnx(model, args.out, args.input_size, args.opset)
    print(f"wrote {args.out} (input image (batch, 3, {args.input_size}, {args.input_size}), output maps)")
    diff = compare_with_onnxruntime(model, args.out, example)
    if diff is None:
        print("onnxruntime not installed: output check skipped")
    elif diff > TOLERANCE:
        raise UserError(f"onnxruntime output differs from PyTorch by {diff:.2e} (> {TOLERANCE:g})")
    else:
        print(f"onnxruntime matches PyTorch: max abs difference {diff:.2e} (tolerance {TOLERANCE:g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
