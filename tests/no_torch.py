"""Run a module as ``python -m`` does, with PyTorch made unimportable (``import torch`` fails as where it is not
installed), so that a test sees what the runtime install without it runs:

    python -m tests.no_torch simplepose.evaluate.demo --onnx model.onnx --input photos/ --json found.json

``NO_TORCH_ALSO=a,b`` makes those modules unimportable too: the project's modules the runtime's wheel leaves out.
"""

from __future__ import annotations

import os
import runpy
import sys


def block_torch() -> None:
    """``import torch`` (and any ``torch.*``) raises ModuleNotFoundError from now on in this process."""
    for name in ["torch", *filter(None, os.environ.get("NO_TORCH_ALSO", "").split(","))]:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's "not importable" entry


if __name__ == "__main__":
    block_torch()
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
