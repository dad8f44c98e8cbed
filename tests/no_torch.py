"""Run a module as ``python -m`` does, with PyTorch made unimportable (``import torch`` fails as where it is not
installed), so that a test sees what the runtime install without it runs:

    python -m tests.no_torch simplepose.evaluate.demo --onnx model.onnx --input photos/ --json found.json
"""

from __future__ import annotations

import runpy
import sys


def block_torch() -> None:
    """``import torch`` (and any ``torch.*``) raises ModuleNotFoundError from now on in this process."""
    sys.modules["torch"] = None  # type: ignore[assignment]  # the import system's "not importable" entry


if __name__ == "__main__":
    block_torch()
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
