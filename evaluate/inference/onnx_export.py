"""The network as an ONNX file: image (B, 3, H, W) -> maps (B, C, H/4, W/4), batch, height and width dynamic, with the
run's config and skeleton in its metadata (what ``evaluate.inference.onnx_runner.load_onnx`` reads back), and the
check of the file against PyTorch with ONNX Runtime. The command is ``python -m simplepose.evaluate.export_onnx``.
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Mapping
from importlib.util import find_spec
from pathlib import Path

import torch
from torch import nn

from simplepose.codec.network_input import SIZE_MULTIPLE, check_input_shape
from simplepose.config.config_file import to_dict
from simplepose.config.schema import Config
from simplepose.config.skeleton import Skeleton
from simplepose.evaluate.inference.onnx_runner import OnnxSource
from simplepose.evaluate.inference.onnx_session import CONFIG_KEY, INPUT_NAME, OUTPUT_NAME, SKELETON_KEY, open_session
from simplepose.utils.errors import UserError
from simplepose.utils.io import atomic_write_bytes
from simplepose.utils.optional import require
from simplepose.utils.torch_compat import torchscript_onnx_export

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
    other_h, other_w = (width, height) if height != width else (height, width + SIZE_MULTIPLE)
    return [example_input(height, width), example_input(other_h, other_w, batch=2, seed=1)]


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
    onnx = require("onnx", "exporting ONNX")  # torch's exporter needs it too
    check_input_shape((1, 3, *input_hw))
    example = example_input(*input_hw)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        # the TorchScript exporter's deprecation notice, and tracer warnings about the input-shape check (it only
        # raises on bad sizes; the sizes themselves stay dynamic, see check_inputs)
        warnings.simplefilter("ignore")
        torchscript_onnx_export(
            FinestOutput(model).eval(),
            (example,),
            buffer,  # a file object, as torch's docs allow
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
    run = OnnxSource(open_session(onnx_path))
    wrapped = FinestOutput(model).eval()
    worst = 0.0
    for x in inputs:
        with torch.no_grad():
            expected = wrapped(x)
        got = run.run(x)
        if got.shape != expected.shape:
            raise UserError(
                f"onnxruntime gives maps of shape {tuple(got.shape)} for an input of {tuple(x.shape)}, PyTorch "
                f"{tuple(expected.shape)}: the exported graph does not take this size"
            )
        worst = max(worst, float((got - expected).abs().max()))
    return worst
