"""An exported network (``python -m simplepose.evaluate.export_onnx``) as a test-time map source of the PyTorch path.

Users call it through the Python API: ``evaluate.PoseEstimator.from_onnx("simplepose.onnx", "cuda", scales=[1.0])``
(image in, people out). Underneath:

    source, cfg = load_onnx("simplepose.onnx")                      # CPU
    source, cfg = load_onnx("simplepose.onnx", providers_for("cuda"), ["eval.scales=[1.0]"])

The session, its metadata (config and skeleton) and its NumPy run are evaluate/inference/onnx_session.py's, which the
runtime without PyTorch (evaluate/onnx_estimator.py) runs too; this module only wraps them for torch tensors.
"""

from __future__ import annotations

from pathlib import Path

import torch

from simplepose.config.schema import Config
from simplepose.config.skeleton import Skeleton
from simplepose.evaluate.inference.map_source import InputBatch
from simplepose.evaluate.inference.onnx_session import OnnxMetadata, OnnxNetwork, Providers, load_onnx_network


class OnnxSource:
    """A map source (``evaluate.inference.map_source.MapSource``) running an exported network with ONNX Runtime.

    ``source(batch)``: ``batch.pixels`` (B, 3, Hp, Wp) float32 BGR/255, Hp and Wp multiples of 64 -> (B, C, Hp/4,
    Wp/4) float32 torch tensor on the pixels' device. The session's providers decide where the network runs; the
    maps come back through host memory. ``network``: the NumPy network underneath (``OnnxNetwork``).
    """

    def __init__(self, session, metadata: OnnxMetadata | None = None, skeleton: Skeleton | None = None):
        self.network = OnnxNetwork(session, metadata, skeleton)
        self.session, self.metadata, self.skeleton = session, metadata, skeleton

    @property
    def providers(self) -> list[str]:
        """The providers the session actually uses (CUDA is dropped when its libraries failed to load)."""
        return self.network.providers

    def __call__(self, batch: InputBatch) -> torch.Tensor:
        return self.run(batch.pixels)

    def run(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, 3, Hp, Wp) float32 BGR/255 -> (B, C, Hp/4, Wp/4) float32 on the pixels' device."""
        maps = self.network(pixels.detach().to("cpu", torch.float32).numpy())
        return torch.from_numpy(maps).to(pixels.device)


def load_onnx(
    path: str | Path, providers: Providers | None = None, overrides: list[str] | None = None
) -> tuple[OnnxSource, Config]:
    """(map source running ``path`` with ONNX Runtime, the run's config from the file's metadata): ``onnx_session
    .load_onnx_network``'s, as a torch map source. Feed the source CPU tensors:
    ``multiscale_maps(image, cfg.eval, source, torch.device("cpu"), skeleton=source.skeleton)``.
    """
    network, cfg = load_onnx_network(path, providers, overrides)
    return OnnxSource(network.session, network.metadata, network.skeleton), cfg
