"""Optional dependencies: each belongs to a named extra of the package (pyproject's
``[project.optional-dependencies]``), and a feature that needs a missing one stops with one line naming the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

from simplepose.utils.errors import UserError

# module -> (extra, pip package): `pip install "simplepose[<extra>]"` installs the package
EXTRAS: dict[str, tuple[str, str]] = {
    "onnx": ("onnx", "onnx"),
    "onnxruntime": ("onnx", "onnxruntime"),
    "torch.utils.tensorboard": ("tensorboard", "tensorboard"),
}


def install_hint(module: str) -> str:
    """``pip install "simplepose[onnx]"`` (or ``pip install onnx``, the package alone) for ``module``."""
    extra, package = EXTRAS[module]
    return f'pip install "simplepose[{extra}]" (or pip install {package})'


def require(module: str, purpose: str) -> ModuleType:
    """``module`` imported; UserError naming the extra that installs it (``key``: the module) when it is missing.
    ``purpose``: what needs it, e.g. "exporting ONNX"."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise UserError(f"{purpose} needs {EXTRAS[module][1]}, which is not installed ({e}): {install_hint(module)}",
                        key=module) from None  # fmt: skip
