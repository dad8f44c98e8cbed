"""``~`` in a path the user typed, expanded wherever a path is read: command words (``--ckpt ~/best.pt``,
``--out=~/x.onnx``, ``data.train=~/coco.h5``: ``utils.errors.cli_main`` expands a command's arguments) and config
values (``train.out_dir: ~/runs`` in a YAML file: ``config.config_file.set_key``). The shell expands a ``~`` only
at the start of an unquoted word; these are the rest.

    expand_home("--ckpt=~/runs/best.pt")  # '--ckpt=/home/me/runs/best.pt'
    expand_home("~other/x")               # other's home folder, as the shell does; unchanged if no such user
"""

from __future__ import annotations

import os
import re
from typing import Any

# a word that is a path starting with ~ (``~``, ``~/x``, ``~user/x``), or an option or key=value whose value is one
_HOME = re.compile(r"^((?:--?[\w-]+=|[\w.]+=)?)(~[\w.-]*(?:/.*)?)$", re.S)


def expand_home(word: str) -> str:
    """``word`` with a leading ``~`` (of the word, or of the value after ``--option=`` or ``key=``) expanded."""
    m = _HOME.match(word)
    if m is None:
        return word
    return m.group(1) + os.path.expanduser(m.group(2))


def expand_home_value(value: Any) -> Any:
    """A config value with ``~`` expanded: a string starting with ``~/`` (or ``~user/``), or a list of them; any
    other value unchanged (YAML's bare ``~`` is null, never a string)."""
    if isinstance(value, str) and value.startswith("~"):
        return os.path.expanduser(value)
    if isinstance(value, list):
        return [expand_home_value(v) for v in value]
    return value
