"""How a printed command line is spelled: the one that runs where the user is.

Every command is a subcommand of one console command, ``simplepose`` (``simplepose.cli``; ``SUBCOMMANDS`` below),
installed with the package::

    simplepose convert --images DIR ...      simplepose train ...      simplepose eval --ckpt ...
    torchrun --nproc_per_node=4 -m simplepose train-distributed ...

That is the spelling wherever the package is installed and ``simplepose`` is on PATH; ``python -m simplepose
train ...`` where it is importable but the command is not on PATH (a virtual environment's python called by its
path). A checkout run without an install has neither (no console script; ``-m simplepose`` imports only from the
folder above the package's root): from its root, not started by the package's name, the short form runs, as the
README writes the commands::

    python -m data.coco_to_hdf5 ...      python train.py ...      torchrun --nproc_per_node=4 train_distributed.py ...

``bench.*`` and ``tests.*`` are not in the package: they run from the checkout's root alone, always spelled short.
A command's help (its module docstring) is written in the console command's spelling; ``commands_here`` respells
its ``simplepose SUB`` lines where the user is.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path
from typing import NamedTuple

from simplepose.utils.errors import UserError

PACKAGE = __name__.partition(".")[0]  # the import name: simplepose (simplepose_runtime in the runtime)
COMMAND = PACKAGE.replace("_", "-")  # the console command: simplepose (simplepose-runtime)
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the checkout's root, or site-packages/simplepose
SUBPACKAGES = ("checkpoint", "codec", "config", "data", "engine", "evaluate", "models", "utils")
LAUNCHERS = ("train", "train_parallel", "train_distributed")  # train.py ... at the root: `python train.py`
FULL_COMMAND = "simplepose"  # the main distribution's console command (and its name)
FULL_INSTALL = f"pip install {FULL_COMMAND}"  # what the runtime distribution lacks: training, checkpoints (PyTorch)


class Subcommand(NamedTuple):
    """``simplepose NAME``: the module (relative to the package) whose ``main(argv)`` runs it, and one line for
    ``simplepose --help``."""

    name: str
    module: str
    summary: str


SUBCOMMANDS = (
    Subcommand("train", "train", "train on one device (first GPU, else CPU); no arguments: the quick start"),
    Subcommand("train-parallel", "train_parallel", "train with DataParallel over the visible GPUs"),
    Subcommand("train-distributed", "train_distributed", "train with DDP, one process per device, under torchrun"),
    Subcommand("eval", "evaluate.coco_eval", "COCO keypoint AP of a checkpoint, the ground truth or a results file"),
    Subcommand("diagnose", "evaluate.coco_eval", "where the AP goes: eval with --diagnose DIR"),
    Subcommand("demo", "evaluate.demo", "people found in images, a folder, a video or a camera"),
    Subcommand("export", "evaluate.export_onnx", "export a checkpoint's network to ONNX"),
    Subcommand("convert", "data.coco_to_hdf5", "COCO-format keypoints (JSON + images) to an HDF5 training file"),
    Subcommand("map-keypoints", "data.map_keypoints", "COCO-format annotations in another skeleton's keypoints"),
    Subcommand("show-sample", "data.show_sample", "draw one training sample with its targets and mask"),
    Subcommand("synthetic", "data.synthetic", "a synthetic COCO-format dataset (any skeleton)"),
    Subcommand("synthetic-video", "data.synthetic_video", "a synthetic video with its identities, for tracking"),
    Subcommand("plot", "engine.plot", "training curves from a run's metrics.jsonl"),
    Subcommand("summary", "models", "a network's parameters, output shapes and multiply-accumulates"),
    Subcommand("convert-weights", "checkpoint.original", "the original's released weights to a SimplePose file"),
)
_BY_MODULE = {s.module: s for s in reversed(SUBCOMMANDS)}  # a module's first subcommand (eval, not diagnose)
_BY_NAME = {s.name: s for s in SUBCOMMANDS}

_IN_PACKAGE = re.compile(rf"^(?:{'|'.join(SUBPACKAGES + LAUNCHERS)})(?:\.|$)")


def started_by_package_name() -> bool:
    """True when this process was started by the package's name: the console command ``simplepose`` (also as
    ``torchrun $(which simplepose)``), ``python -m simplepose`` or ``python -m simplepose.X`` (``torchrun -m``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(spec, "name", "").startswith(PACKAGE + "."):
        return True
    return Path(sys.argv[0] if sys.argv else "").stem == COMMAND  # the console script (simplepose, simplepose.exe)


def short_form() -> bool:
    """True when the checkout's short spelling (``python -m data.coco_to_hdf5``) runs where the user is: not
    started by the package's name, and the working folder is the root of the imported package."""
    if started_by_package_name():
        return False
    try:
        return Path.cwd().resolve() == PACKAGE_ROOT
    except OSError:  # the working folder was removed
        return False


def console() -> str:
    """How the console command is called: ``simplepose`` when on PATH, else ``python -m simplepose`` (the runtime's:
    ``simplepose-runtime``, ``python -m simplepose_runtime``)."""
    return COMMAND if shutil.which(COMMAND) else f"python -m {PACKAGE}"


def installed(module: str) -> bool:
    """Whether this installation holds ``module`` (dotted, relative to the package), found without importing it (no
    torch loads): the runtime distribution lacks the modules on torch."""
    try:
        return importlib.util.find_spec(f"{PACKAGE}.{module}") is not None
    except ModuleNotFoundError:  # its package is missing too
        return False


def full_install() -> bool:
    """Whether this installation runs PyTorch's paths: the main distribution, with torch installed (the runtime
    distribution has neither the modules on torch nor, as a rule, torch)."""
    return PACKAGE == "simplepose" and importlib.util.find_spec("torch") is not None


def refuse_without_full_install(what: str) -> None:
    """UserError ``WHAT needs the full install (PyTorch): pip install simplepose`` where ``full_install`` is not;
    ``what``: the command (and option) that needs it."""
    if not full_install():
        raise UserError(f"{what} needs the full install (PyTorch): {FULL_INSTALL}")


def _short(module: str, program: str) -> str:
    """``module`` in the checkout's short spelling, started by ``program`` (``python``, ``torchrun ...``)."""
    return f"{program} {module}.py" if module in LAUNCHERS else f"{program} -m {module}"


def command(module: str, args: str = "", torchrun: str = "") -> str:
    """The command line that runs ``module`` (dotted, relative to the package: ``data.coco_to_hdf5``, ``train``)
    with ``args`` where the user is; ``torchrun``: that launcher's options (``--nproc_per_node=4``), started by it.

    ``command("data.coco_to_hdf5", "--images DIR")`` -> ``simplepose convert --images DIR`` where the package is
    installed, ``python -m data.coco_to_hdf5 --images DIR`` from a checkout's root; in the runtime distribution a
    command it lacks (``export``) is spelled as the full install runs it (``simplepose export``)."""
    program = f"torchrun {torchrun}".rstrip() if torchrun else "python"
    sub = _BY_MODULE.get(module)
    if not _IN_PACKAGE.match(module):  # bench.*, tests.*: the checkout's root only
        line = f"{program} -m {module}"
    elif short_form():
        line = _short(module, program)
    elif sub is not None and PACKAGE != FULL_COMMAND and not installed(module):  # the full install's alone
        line = f"{FULL_COMMAND} {sub.name}"
    elif sub is None:  # a module of the package without a subcommand
        line = f"{program} -m {PACKAGE}.{module}"
    elif torchrun:  # torchrun starts a module by -m, the console command by its path: -m runs wherever importable
        line = f"{program} -m {PACKAGE} {sub.name}"
    else:
        line = f"{console()} {sub.name}"
    return f"{line} {args}".rstrip()


# `simplepose SUB` in a help text (written so in either distribution), or `-m simplepose SUB` after torchrun
_SUBCOMMAND = re.compile(
    rf"(?<![\w.-])(-m )?{FULL_COMMAND} ({'|'.join(sorted(map(re.escape, _BY_NAME), key=len, reverse=True))})(?![\w-])"
)


def commands_here(text: str) -> str:
    """``text`` (a help text, such as a command's docstring, written in the console command's spelling) with its
    ``simplepose SUB`` and ``torchrun ... -m simplepose SUB`` spelled as ``command`` spells them where the user
    is."""

    def here(m: re.Match[str]) -> str:
        module = _BY_NAME[m.group(2)].module
        if m.group(1):  # after torchrun: its program part
            return _short(module, "").lstrip() if short_form() else m.group(0)
        return command(module)

    return _SUBCOMMAND.sub(here, text)
