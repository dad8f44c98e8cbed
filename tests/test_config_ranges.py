"""Every numeric and list setting declares its range (config.schema ``Range``), and a value just outside it, set on
the command line, ends in one line naming the key, the value and the range, exit status 2, before anything is
written. The values are generated from the schema, so a new setting is covered without being listed here."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
import types
import typing

import pytest

from simplepose import train
from simplepose.config.config_file import load_config
from simplepose.config.schema import Config, Range, range_of
from tests.paths import REPO_ROOT


def settings(cls: type = Config, prefix: str = "") -> list[tuple[str, typing.Any, dataclasses.Field]]:
    """(dotted key, type, field) of every leaf setting."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out += settings(hints[f.name], f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, hints[f.name], f))
    return out


def number_type(tp: typing.Any) -> type | None:
    """int or float where ``tp`` is (or may be) one, the item type of a list; else None."""
    if typing.get_origin(tp) is list:
        return number_type(typing.get_args(tp)[0])
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        found = [number_type(a) for a in typing.get_args(tp)]
        return next((t for t in found if t is not None), None)
    return tp if tp in (int, float) else None


def is_list(tp: typing.Any) -> bool:
    return typing.get_origin(tp) is list


def beyond(bound: float, is_open: bool, kind: type, direction: float) -> float:
    """The value just past ``bound`` in ``direction`` (-inf or inf): the bound itself when open."""
    if is_open:
        return kind(bound)
    return int(bound) + int(math.copysign(1, direction)) if kind is int else math.nextafter(bound, direction)


def numbers_outside(limits: Range, kind: type) -> list[float]:
    """Numbers just outside ``limits`` (NaN too for a float setting)."""
    out = [] if limits.low is None else [beyond(limits.low, limits.low_open, kind, -math.inf)]
    out += [] if limits.high is None else [beyond(limits.high, limits.high_open, kind, math.inf)]
    return out + ([math.nan] if kind is float else [])


def values_outside(tp: typing.Any, limits: Range, default: typing.Any) -> list[typing.Any]:
    """Values of a setting of type ``tp`` just outside ``limits``: for a list, one item outside, and one item fewer
    or more than it may hold."""
    kind = number_type(tp)
    if not is_list(tp):
        return numbers_outside(limits, kind)
    inside = default[0] if default else kind(limits.low + 1 if limits.low is not None else 0)
    size = max(limits.min_items, 1)
    lists = [[*[inside] * (size - 1), v] for v in numbers_outside(limits, kind)]
    lists += [[inside] * (limits.min_items - 1)] if limits.min_items else []
    return lists + ([[inside] * (limits.max_items + 1)] if limits.max_items is not None else [])


def cases() -> list[tuple[str, typing.Any, Range]]:
    defaults = dataclasses.asdict(Config())
    out = []
    for key, tp, f in settings():
        limits = range_of(f)
        if limits is not None:
            section, name = key.split(".")
            out += [(key, v, limits) for v in values_outside(tp, limits, defaults[section][name])]
    return out


def as_text(value: typing.Any) -> str:
    return f"[{','.join(map(as_text, value))}]" if isinstance(value, list) else str(value)


def test_every_numeric_and_list_setting_declares_its_range():
    undeclared = [key for key, tp, f in settings() if (number_type(tp) or is_list(tp)) and range_of(f) is None]
    # lists of text (train.freeze's patterns of parameter names, the per-source file lists) have no range
    text_lists = [key for key, tp, f in settings() if is_list(tp) and typing.get_args(tp)[0] is str]
    assert undeclared == text_lists and "train.freeze" in text_lists and "data.train_sources" in text_lists


def test_every_default_and_preset_is_inside_the_ranges():
    for preset in [None, *sorted((REPO_ROOT / "config").glob("*.yaml"))]:
        load_config(preset)


def test_the_cases_cover_every_ranged_setting_from_both_sides():
    keys = {key for key, _, f in settings() if range_of(f) is not None}
    assert {key for key, _, _ in cases()} == keys
    assert ("train.batch_size", 0) in [(k, v) for k, v, _ in cases()]
    assert ("eval.scales", [0.0]) in [(k, v) for k, v, _ in cases()]


@pytest.mark.parametrize("key, value, limits", cases(), ids=lambda x: as_text(x) if not isinstance(x, Range) else "")
def test_a_value_outside_its_range_ends_in_one_line_and_writes_nothing(
    key, value, limits, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)  # the quick start would make its data under the working folder
    out = tmp_path / "run"
    rc = train.main([f"{key}={as_text(value)}", f"train.out_dir={out}"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    expected = SPECIFIC.get(key, f"must be {limits.describe(isinstance(value, list))}")
    assert f"{key} {expected}, got {as_text(value).replace(',', ', ')}" in err
    assert list(tmp_path.iterdir()) == []


# settings whose own check comes first and says more than the range (data.input_size: the valid sizes, in the words
# of the converter's --input-size)
SPECIFIC = {
    "data.input_size": "must be a positive multiple of 64 (the network's output stride 4 x 16 for its four poolings)"
}


@pytest.mark.parametrize("words", [["train.batch_size=0"], ["train.epochs=0"], ["eval.scales=[0]"]])
def test_the_command_refuses_a_setting_out_of_its_range_before_writing(words, tmp_path):
    out = tmp_path / "run"
    argv = [sys.executable, str(REPO_ROOT / "train.py"), *words, f"train.out_dir={out}"]
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: ") and words[0].split("=")[0] in r.stderr and "must be" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_docs_name_every_ranged_setting():
    text = (REPO_ROOT / "docs" / "training.md").read_text()
    section = text.split("\n## Setting ranges\n", 1)[1].split("\n## ", 1)[0]
    missing = [key for key, _, f in settings() if range_of(f) is not None and f"`{key}`" not in section]
    assert missing == []
