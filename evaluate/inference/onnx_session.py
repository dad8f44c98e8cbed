"""An exported network (``python -m simplepose.evaluate.export_onnx``) opened with ONNX Runtime, with NumPy in and
out: no PyTorch is imported, so the runtime without it (evaluate/onnx_estimator.py) and the PyTorch path's map source
(evaluate/inference/onnx_runner.py) run the same session, config and skeleton.

    network, cfg = load_onnx_network("simplepose.onnx")              # CPU
    maps = network(pixels)  # (B, 3, Hp, Wp) float32 BGR/255 -> (B, C, Hp/4, Wp/4) float32

The .onnx file is all that is needed: the export stores the run's config (and the skeleton definition when the
checkpoint carries one) as JSON in the model's ``metadata_props`` (keys ``CONFIG_KEY``, ``SKELETON_KEY``), and
``load_onnx_network`` rebuilds the config from it, so multi-scale + flip inference and the decoder run exactly as with
the PyTorch model. onnxruntime is an optional dependency, imported only when a model is run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from simplepose.codec.network_input import check_input_shape
from simplepose.config.config_file import ConfigError, config_from_dict, parse_overrides, with_overrides
from simplepose.config.schema import Config
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_definition import skeleton_from_dict
from simplepose.config.skeleton_file import skeleton_of
from simplepose.utils.commands import command
from simplepose.utils.errors import UserError
from simplepose.utils.file_kind import existing_file_kind
from simplepose.utils.optional import require

CONFIG_KEY = "simplepose.config"  # the run's config, JSON of config.config_file.to_dict
SKELETON_KEY = "simplepose.skeleton"  # the checkpoint's skeleton definition, JSON (absent when it had none)
INPUT_NAME, OUTPUT_NAME = "image", "maps"
CPU_PROVIDER, CUDA_PROVIDER = "CPUExecutionProvider", "CUDAExecutionProvider"
Providers = list[str | tuple[str, dict]]


def import_onnxruntime() -> ModuleType:
    """The onnxruntime module; UserError naming the extra that installs it when it is missing."""
    return require("onnxruntime", "running an ONNX model (onnxruntime-gpu for CUDA)")


def providers_for(device: str = "cpu", cpu_hint: str = 'providers="cpu"') -> Providers:
    """ONNX Runtime execution providers for ``device``: "cpu", "cuda", "cuda:N", or "auto" (CUDA when this
    onnxruntime build has it, else the CPU). CUDA always comes with the CPU provider as fallback. ``cpu_hint``: how
    the caller's user asks for the CPU, for the message when CUDA is missing (the demo's ``--device cpu``)."""
    available = import_onnxruntime().get_available_providers()
    if device == "auto":
        device = "cuda" if CUDA_PROVIDER in available else "cpu"
    if device == "cpu":
        return [CPU_PROVIDER]
    kind, _, index = device.partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise UserError(f"device {device!r} for ONNX Runtime must be cpu, cuda, cuda:N or auto", key="device")
    if CUDA_PROVIDER not in available:
        raise UserError(
            f"device {device!r}: this onnxruntime has no CUDA provider (it has {', '.join(available)}); "
            f"install onnxruntime-gpu, or run on the CPU: {cpu_hint}",
            key="device",
        )
    return [(CUDA_PROVIDER, {"device_id": int(index or 0)}), CPU_PROVIDER]


@dataclass(frozen=True)
class OnnxMetadata:
    """What the export stored beside the graph."""

    config: dict  # the run's config (config.config_file.to_dict)
    skeleton: dict | None  # the checkpoint's skeleton definition, None when it carried none


class OnnxNetwork:
    """An exported network in an ONNX Runtime session: ``network(pixels)``, (B, 3, Hp, Wp) float32 BGR/255 with Hp
    and Wp multiples of 64 -> (B, C, Hp/4, Wp/4) float32, NumPy in and out (``host_maps.HostNetwork``). The
    session's providers decide where it runs. ``metadata``: what the export stored (None when not read);
    ``skeleton``: the model's, the layout of its maps."""

    def __init__(self, session, metadata: OnnxMetadata | None = None, skeleton: Skeleton | None = None):
        self.session = session
        self.metadata = metadata
        self.skeleton = skeleton
        self._input = session.get_inputs()[0].name

    @property
    def providers(self) -> list[str]:
        """The providers the session actually uses (CUDA is dropped when its libraries failed to load)."""
        return self.session.get_providers()

    def __call__(self, pixels: np.ndarray) -> np.ndarray:
        check_input_shape(tuple(pixels.shape))
        x = np.ascontiguousarray(pixels, dtype=np.float32)
        return self.session.run(None, {self._input: x})[0]


def open_session(path: str | Path, providers: Providers | None = None):
    """An onnxruntime InferenceSession of ``path`` (CPU provider when ``providers`` is None); UserErrors name the
    file."""
    ort = import_onnxruntime()
    path = Path(path)
    kind = existing_file_kind(path, "ONNX model", UserError, f" (write one with {command('evaluate.export_onnx')})")
    if kind.name in _NOT_ONNX:
        raise UserError(f"{path} is {kind.description}, not an ONNX model: {_NOT_ONNX[kind.name](path)}", file=path)
    try:
        return ort.InferenceSession(str(path), providers=providers or [CPU_PROVIDER])
    except Exception as e:  # onnxruntime's own exception types (InvalidProtobuf, Fail, ...) share no useful base
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"ONNX Runtime cannot load {path} ({detail}); export it again", file=path) from None


def _checkpoint_instead(path: Path) -> str:
    return (
        f"a PyTorch checkpoint (training's .pt) is given with --ckpt {path} (PoseEstimator.from_checkpoint); to "
        "run it with ONNX Runtime, export it first: "
        + command("evaluate.export_onnx", f"--ckpt {path} --out {path.with_suffix('.onnx')}")
    )


# What a file of another kind given where an ONNX model belongs is given with instead (utils.file_kind).
_NOT_ONNX = {
    "zip": _checkpoint_instead,
    "pickle": _checkpoint_instead,
    "hdf5": lambda path: (
        f"a dataset converted by {command('data.coco_to_hdf5')} is given to training as data.train=FILE"
    ),
    "empty": lambda path: (
        f"a copy or export that did not finish? Export it again with {command('evaluate.export_onnx')}"
    ),
}


def read_metadata(session, source: str) -> OnnxMetadata:
    """The config and skeleton an export stored in the model's metadata; UserError when they are missing."""
    props = session.get_modelmeta().custom_metadata_map
    if CONFIG_KEY not in props:
        raise UserError(
            f"{source} carries no SimplePose config in its metadata ({CONFIG_KEY}); export the checkpoint with "
            f"{command('evaluate.export_onnx')}, which stores what evaluation needs",
            file=source,
            key=CONFIG_KEY,
        )
    config, skeleton = (_json_entry(props, key, source) for key in (CONFIG_KEY, SKELETON_KEY))
    if not isinstance(config, dict) or not (skeleton is None or isinstance(skeleton, dict)):
        raise UserError(
            f"{source}: the metadata {CONFIG_KEY} / {SKELETON_KEY} must be JSON objects; export it again",
            file=source,
            key=CONFIG_KEY if not isinstance(config, dict) else SKELETON_KEY,
        )
    return OnnxMetadata(config, skeleton)


def _json_entry(props: dict[str, str], key: str, source: str):
    if key not in props:
        return None
    try:
        return json.loads(props[key])
    except json.JSONDecodeError as e:
        raise UserError(
            f"{source}: metadata {key} is not valid JSON ({e.msg}); export it again", file=source, key=key
        ) from None


def config_from_metadata(metadata: OnnxMetadata, source: str, overrides: list[str] | None = None) -> Config:
    """The run's config stored in an export, with ``key=value`` overrides applied (e.g. ``eval.scales=[1.0]``)."""
    try:
        cfg = config_from_dict(metadata.config)
    except ConfigError as e:
        raise UserError(
            f"the config stored in {source} is invalid ({e}); export it again", file=source, key=e.key
        ) from None
    return with_overrides(cfg, parse_overrides(overrides), "override")


def load_onnx_network(
    path: str | Path, providers: Providers | None = None, overrides: list[str] | None = None
) -> tuple[OnnxNetwork, Config]:
    """(``path`` opened with ONNX Runtime, the run's config from the file's metadata). The network's ``skeleton`` is
    the model's (stored in the file; for exports without one, the config's ``data.skeleton``).

    ``providers``: onnxruntime execution providers (``providers_for("cuda")``); None: the CPU. ``overrides``:
    ``key=value`` config changes (the ``eval`` section is what inference reads)."""
    session = open_session(path, providers)
    metadata = read_metadata(session, str(path))
    cfg = config_from_metadata(metadata, str(path), overrides)
    skeleton = skeleton_from_dict(metadata.skeleton, str(path)) if metadata.skeleton else skeleton_of(cfg)
    return OnnxNetwork(session, metadata, skeleton), cfg
