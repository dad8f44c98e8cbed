"""The decoder's settings come from ``eval.*`` by name: each field of a settings group (``PeakParams``,
``LimbParams``, ``AssemblyParams``) is the ``config.schema.EvalConfig`` field of the same name, so a setting has one
name from the command line to the code that reads it."""

from __future__ import annotations

from dataclasses import fields
from typing import TypeVar

from config.schema import EvalConfig

T = TypeVar("T")


def from_eval_config(cls: type[T], cfg: EvalConfig) -> T:
    """The settings dataclass ``cls`` with each field set to the ``cfg`` field of its name."""
    return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls)})
