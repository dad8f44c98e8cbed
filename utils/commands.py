"""How a printed command line is spelled: the one that runs where the user is.

Two spellings run the same command. From the checkout's root the short one, as the README writes it::

    python -m data.coco_to_hdf5 ...      python train.py ...      torchrun --nproc_per_node=4 train_distributed.py ...

and from any folder, once the package is installed (editable or from a wheel), the package's name::

    python -m simplepose.data.coco_to_hdf5 ...      python -m simplepose.train ...
    torchrun --nproc_per_node=4 -m simplepose.train_distributed ...

The rule (``short_form``): a process started by the package's name (``python -m simplepose.X``, also under
``torchrun -m``) prints the package's name; any other process prints the short form when its working folder is the
root of the package it imports (the checkout of ``python -m X``, ``python train.py``, a test, a notebook there), and
the package's name anywhere else (a user's folder, an installed wheel, another checkout). ``bench.*`` and
``tests.*`` are not in the package: they run from the checkout's root alone and are always spelled short.
Docstrings: a command's own (its --help) are written in the checkout's spelling and printed through
``commands_here``; every other library module's, read by ``help()`` and editors wherever the package is installed,
spell ``python -m simplepose.X`` (tests/test_commands.py keeps both).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PACKAGE = "simplepose"
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the checkout's root, or site-packages/simplepose
SUBPACKAGES = ("checkpoint", "codec", "config", "data", "engine", "evaluate", "models", "utils")
LAUNCHERS = ("train", "train_parallel", "train_distributed")  # train.py ... at the root: `python train.py`

_IN_PACKAGE = re.compile(rf"^(?:{'|'.join(SUBPACKAGES + LAUNCHERS)})(?:\.|$)")


def started_by_package_name() -> bool:
    """True when this process's main module was started by the package's name (``python -m simplepose.X``,
    ``torchrun -m simplepose.X``); its ``__spec__`` holds the name it was given."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", "").startswith(PACKAGE + ".")


def short_form() -> bool:
    """True when the short spelling (``python -m data.coco_to_hdf5``) runs where the user is: not started by the
    package's name, and the working folder is the root of the imported package."""
    if started_by_package_name():
        return False
    try:
        return Path.cwd().resolve() == PACKAGE_ROOT
    except OSError:  # the working folder was removed
        return False


def command(module: str, args: str = "", torchrun: str = "") -> str:
    """The command line that runs ``module`` (dotted, relative to the package: ``data.coco_to_hdf5``, ``train``)
    with ``args`` where the user is; ``torchrun``: that launcher's options (``--nproc_per_node=4``), started by it.

    ``command("data.coco_to_hdf5", "--images DIR")`` -> ``python -m data.coco_to_hdf5 --images DIR`` from the
    checkout's root, ``python -m simplepose.data.coco_to_hdf5 --images DIR`` elsewhere."""
    program = f"torchrun {torchrun}".rstrip() if torchrun else "python"
    if not _IN_PACKAGE.match(module):  # bench.*, tests.*: the checkout's root only
        line = f"{program} -m {module}"
    elif not short_form():
        line = f"{program} -m {PACKAGE}.{module}"
    elif module in LAUNCHERS:
        line = f"{program} {module}.py"
    else:
        line = f"{program} -m {module}"
    return f"{line} {args}".rstrip()


# the short spellings in a text: `python -m data.x`, `-m evaluate.x` (after torchrun), `python train.py`, and a
# launcher's file name among the words of a torchrun command (`torchrun --...` up to the line's end, over `\`
# continuations)
_MODULE = re.compile(rf"(?<=-m )(?=(?:{'|'.join(SUBPACKAGES)})\b)")
_PYTHON_LAUNCHER = re.compile(rf"\bpython ({'|'.join(LAUNCHERS)})\.py\b")
_TORCHRUN = re.compile(r"\btorchrun(?= -)(?:[^\n]*\\\n)*[^\n]*")
_LAUNCHER_FILE = re.compile(rf"(?<=\s)({'|'.join(LAUNCHERS)})\.py\b")


def commands_here(text: str) -> str:
    """``text`` (a help text written in the checkout's spelling, such as a command's docstring) with its command
    lines spelled as ``command`` spells them where the user is: unchanged from the checkout's root."""
    if short_form():
        return text
    text = _TORCHRUN.sub(lambda m: _LAUNCHER_FILE.sub(rf"-m {PACKAGE}.\1", m.group(0)), text)
    text = _PYTHON_LAUNCHER.sub(rf"python -m {PACKAGE}.\1", text)
    return _MODULE.sub(f"{PACKAGE}.", text)
