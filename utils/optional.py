"""Optional dependencies: each belongs to a named extra of the package (pyproject's
``[project.optional-dependencies]``), and a feature that needs a missing one stops with one line naming the extra.

The runtime distribution (``simplepose-runtime``) has extras of its own (``RUNTIME_EXTRAS``: scoring a results file,
``simplepose-runtime[eval]``) for packages that the full install requires outright."""

from __future__ import annotations

import importlib
from types import ModuleType

from simplepose.utils.commands import COMMAND
from simplepose.utils.errors import UserError

# module -> (extra, pip package): `pip install "simplepose[<extra>]"` installs the package
EXTRAS: dict[str, tuple[str, str]] = {
    "onnx": ("onnx", "onnx"),
    "onnxruntime": ("onnx", "onnxruntime"),
    "torch.utils.tensorboard": ("tensorboard", "tensorboard"),
}
# module -> (extra, pip package) of the runtime distribution; the full install requires these packages
RUNTIME_EXTRAS: dict[str, tuple[str, str]] = {
    "pycocotools": ("eval", "pycocotools"),
    "faster_coco_eval": ("eval", "faster-coco-eval"),
    "matplotlib": ("eval", "matplotlib"),
}


def install_hint(module: str) -> str:
    """``pip install "simplepose[onnx]"`` (or ``pip install onnx``, the package alone) for ``module``; in the runtime
    ``pip install "simplepose-runtime[eval]"`` for a module of ``RUNTIME_EXTRAS``; a requirement of this
    distribution (pycocotools in the full install): its package."""
    extras = EXTRAS if COMMAND == "simplepose" else RUNTIME_EXTRAS
    package = {**EXTRAS, **RUNTIME_EXTRAS}[module][1]
    if module not in extras:
        return f"pip install {package}"
    return f'pip install "{COMMAND}[{extras[module][0]}]" (or pip install {package})'


def require(module: str, purpose: str) -> ModuleType:
    """``module`` imported; UserError naming the extra that installs it (``key``: the module) when it is missing.
    ``purpose``: what needs it, e.g. "exporting ONNX"."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        package = {**EXTRAS, **RUNTIME_EXTRAS}[module][1]
        raise UserError(f"{purpose} needs {package}, which is not installed ({e}): {install_hint(module)}",
                        key=module) from None  # fmt: skip
