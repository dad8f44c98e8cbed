"""``python -m simplepose MODULE_OR_SCRIPT [ARGS...]``: a command of the checkout from any folder, as
``python -m MODULE ARGS`` (``evaluate.demo``, ``evaluate.coco_eval``, ``data.coco_to_hdf5``, ...) or ``python SCRIPT
ARGS`` (``train.py``, ``train_parallel.py``) run in the checkout; relative paths in ARGS are the caller's."""

from __future__ import annotations

import importlib.util
import runpy
import sys

from simplepose import ROOT

USAGE = "usage: python -m simplepose MODULE_OR_SCRIPT [ARGS...]   e.g. python -m simplepose evaluate.demo --help"


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(f"{USAGE}\n{__doc__}")
        return 0 if argv else 2
    target, args = argv[0], argv[1:]
    sys.argv = [target, *args]
    if target.endswith(".py"):
        script = ROOT / target
        if not script.is_file():
            sys.stderr.write(f"error: {target} is not a script of the checkout {ROOT} (train.py, train_parallel.py)\n")
            return 2
        runpy.run_path(str(script), run_name="__main__")
    elif importlib.util.find_spec(target.split(".")[0]) is None or importlib.util.find_spec(target) is None:
        sys.stderr.write(
            f"error: {target} is no module of the checkout {ROOT} (e.g. evaluate.demo, evaluate.coco_eval)\n"
        )
        return 2
    else:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
