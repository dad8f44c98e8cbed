"""SimplePose from any folder: the Python API and the commands of a checkout, without installing its generic
top-level packages (``config``, ``codec``, ``data``, ``models``, ``checkpoint``, ``evaluate``, ``engine``,
``utils``) into site-packages.

    pip install -e /path/to/SimplePose              # once: installs this small package only, linked to the checkout
    from simplepose import PoseEstimator            # then from any folder: the names of ``evaluate``
    python -m simplepose evaluate.demo --ckpt ...   # a command, as ``python -m evaluate.demo`` in the checkout
    python -m simplepose train.py --config ...      # a script of the checkout

Importing it puts the checkout's root first on ``sys.path`` of this process only (nothing is written anywhere), so
the project's packages import by their own names, as they do in the checkout. ``pip install -e`` links this folder
(``shim/``) alone: other programs see ``simplepose`` and nothing else of the checkout. Without installing anything,
``PYTHONPATH=/path/to/SimplePose/shim`` does the same.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

# this file is <checkout>/shim/simplepose/__init__.py (pip install -e links it; a copy is refused below)
ROOT = Path(__file__).resolve().parents[2]
# the checkout's top-level packages; a module of one of these names imported from elsewhere would hide them
PACKAGES = ("utils", "config", "codec", "data", "models", "checkpoint", "evaluate", "engine")


def _use_checkout() -> None:
    """Put ``ROOT`` first on ``sys.path``; ImportError (one line, what to do) when this package is not inside a
    checkout, or a module of one of the checkout's package names was imported from elsewhere already."""
    if not (ROOT / "evaluate" / "__init__.py").is_file():
        raise ImportError(
            f"simplepose at {Path(__file__).parent} is not inside a SimplePose checkout (installed as a copy by "
            "`pip install .`?): install it linked to the checkout with `pip install -e /path/to/SimplePose`, or put "
            "/path/to/SimplePose/shim on PYTHONPATH"
        )
    for name in PACKAGES:
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None) if module is not None else None
        if module is not None and (where is None or not Path(where).resolve().is_relative_to(ROOT)):
            raise ImportError(
                f"a module named {name!r} ({where or 'without a file'}) is already imported in this process, and "
                f"hides the package of that name in {ROOT}: import simplepose before it, or rename your module"
            )
    if str(ROOT) not in sys.path[:1]:
        sys.path.insert(0, str(ROOT))


_use_checkout()

# the API, imported when first asked for (``from simplepose import PoseEstimator``): a command run by
# ``python -m simplepose`` loads torch itself, after its own start-up settings (train.py's OpenMP ones); the names are
# the checkout's ``evaluate`` package's, which imports nothing heavy until one is used
API = tuple(importlib.import_module("evaluate").__all__)
__all__ = ["ROOT", *API]


def __getattr__(name: str):
    if name in API:
        import evaluate

        return getattr(evaluate, name)
    raise AttributeError(f"module 'simplepose' has no attribute {name!r}")
