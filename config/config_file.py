"""YAML presets, ``key=value`` overrides, validation and saving of the typed config.

    cfg = load_config("config/quickstart.yaml", ["train.lr=1e-4", "eval.scales=[1.0]"])

Every key is checked against the dataclasses of ``config.schema``: an unknown key or a value of the wrong
type raises ``ConfigError`` naming the key and its closest valid names.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from simplepose.config.presets import preset_names, preset_path
from simplepose.config.schema import OUTPUT_STRIDE, Config, DataConfig, Range, TrackConfig, range_of
from simplepose.utils.commands import command
from simplepose.utils.errors import UserError
from simplepose.utils.file_kind import file_kind
from simplepose.utils.io import atomic_write_text
from simplepose.utils.user_paths import expand_home_value


class ConfigError(UserError):
    """A config file or override that does not fit the schema. ``key``: the dotted key at fault (None for a file that
    cannot be read at all); ``file``: the config file, when the error is in one; ``suggestions``: the valid keys
    closest to an unknown one."""

    def __init__(
        self, message: str, *, key: str | None = None, file: str | Path | None = None, suggestions: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, key=key, file=file)
        self.suggestions = tuple(suggestions)


# Keys that earlier versions had. A saved config (a checkpoint's) may still hold them: they are dropped there; a
# preset or an override that sets one is refused with the reason.
RETIRED_KEYS = {
    "data.stride": "the output stride is fixed at 4 by the network (config.schema.OUTPUT_STRIDE)",
    "train.fault_nan_steps": "fault injection is a test harness now (tests/harness), not a setting",
    "train.fault_nan_rank": "fault injection is a test harness now (tests/harness), not a setting",
    "train.fault_exit_step": "fault injection is a test harness now (tests/harness), not a setting",
    "train.fault_exit_rank": "fault injection is a test harness now (tests/harness), not a setting",
}


def all_keys(cls: type = Config, prefix: str = "") -> list[str]:
    """Every dotted leaf key of the config, e.g. ``train.lr``."""
    keys = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        if isinstance(t, type) and dataclasses.is_dataclass(t):
            keys += all_keys(t, f"{prefix}{f.name}.")
        else:
            keys.append(prefix + f.name)
    return keys


def _same_section_matches(key: str) -> list[str]:
    """The keys of ``key``'s section whose last part is close to its last part, best first: the initials of its
    words (``learning_rate``, ``lerning_rate`` -> ``lr``), a longer name it begins (``warmup`` -> ``warmup_epochs``),
    then one spelt alike (``epocs`` -> ``epochs``)."""
    section, _, leaf = key.rpartition(".")
    leaves = {k.rpartition(".")[2]: k for k in all_keys() if k.rpartition(".")[0] == section}
    initials = "".join(word[0] for word in leaf.split("_") if word)
    found = [leaves[initials]] if "_" in leaf and initials in leaves else []
    found += [k for n, k in leaves.items() if n.startswith(f"{leaf}_")]
    alike = difflib.get_close_matches(leaf, leaves, n=3, cutoff=0.6)
    return list(dict.fromkeys(found + [leaves[n] for n in alike]))


def _unknown_key(key: str, where: str) -> ConfigError:
    close = _same_section_matches(key)[:3] or difflib.get_close_matches(key, all_keys(), n=3, cutoff=0.5)
    if not close:  # try matching the last component alone, e.g. "lr" -> "train.lr"
        leaf = key.rsplit(".", 1)[-1]
        close = [k for k in all_keys() if k.rsplit(".", 1)[-1] == leaf] or difflib.get_close_matches(
            leaf, all_keys(), n=3, cutoff=0.3
        )
    hint = f"; closest valid names: {', '.join(close)}" if close else ""
    return ConfigError(f"unknown config key '{key}' ({where}){hint}", key=key, suggestions=tuple(close))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against type ``tp`` and convert where lossless (int -> float, tuple -> list)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"config key '{key}': invalid value {value!r}", key=key)
    if origin is typing.Literal:
        if isinstance(value, bool) and value not in args:  # YAML 1.1 reads off/on/no/yes as booleans
            value = next((w for w in (("on", "yes", "true") if value else ("off", "no", "false")) if w in args), value)
        if value not in args:
            raise ConfigError(f"config key '{key}': {value!r} is not one of {', '.join(map(repr, args))}", key=key)
        return value
    if origin is list:
        if isinstance(value, str):  # "0.5,1,2" or an unquoted "[a,b]" YAML could not read
            inner = value.strip()
            inner = inner[1:-1] if inner.startswith("[") and inner.endswith("]") else inner
            value = [_yaml_or_raw(v.strip()) for v in inner.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key '{key}': expected a list, got {value!r}", key=key)
        return [_coerce(v, args[0], f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"config key '{key}': expected true or false, got {value!r}", key=key)
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"config key '{key}': expected an integer, got {value!r}", key=key)
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "1e-3" (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"config key '{key}': expected a number, got {value!r}", key=key)
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"config key '{key}': expected a string, got {value!r}", key=key)
    raise ConfigError(f"config key '{key}': unsupported type {tp!r}", key=key)


def _field_type(obj: Any, name: str) -> Any:
    return typing.get_type_hints(type(obj))[name]


def set_key(cfg: Config, key: str, value: Any, where: str) -> None:
    """Set one dotted key, type-checked. Only for building a config: a validated one is changed through
    ``with_overrides``, which returns a new, validated copy."""
    if key in RETIRED_KEYS:
        raise ConfigError(
            f"config key '{key}' ({where}) is no longer a setting: {RETIRED_KEYS[key]}; remove it", key=key
        )
    parts = key.split(".")
    obj = cfg
    for i, part in enumerate(parts):
        if not dataclasses.is_dataclass(obj) or part not in {f.name for f in dataclasses.fields(obj)}:
            raise _unknown_key(key, where)
        if i == len(parts) - 1:
            tp = _field_type(obj, part)
            if dataclasses.is_dataclass(tp):
                raise ConfigError(f"config key '{key}' is a section; set its fields, e.g. '{key}.<name>'", key=key)
            setattr(obj, part, _coerce(expand_home_value(value), tp, key))
        else:
            obj = getattr(obj, part)


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + str(k)] = v
    return out


def _yaml_or_raw(raw: str) -> Any:
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def parse_override(text: str) -> tuple[str, Any]:
    """``"train.lr=1e-4"`` -> ``("train.lr", 1e-4)``; the value is parsed as YAML."""
    if "=" not in text:
        raise ConfigError(
            f"override '{text}' is not of the form key=value (e.g. train.lr=1e-4){_meant(text)}", key=text
        )
    key, raw = text.split("=", 1)
    return key.strip(), _yaml_or_raw(raw) if raw.strip() else ""


def _meant(word: str) -> str:
    """What a word given where a ``key=value`` belongs was probably meant as ("" when nothing fits)."""
    suffix = Path(word).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return f"; a preset is given as --config {word}"
    if suffix in (".pt", ".pth"):
        return f"; a checkpoint is given as train.resume={word} (continue its run) or train.init_weights={word}"
    if word in all_keys():
        return f"; write {word}=VALUE as one word, without spaces"
    return ""


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Defaults, then the YAML file (if any), then ``key=value`` overrides; validated. The one way a command
    builds its config; later changes go through ``with_overrides``."""
    cfg = Config()
    for p, data in preset_chain(preset_file(path)) if path else []:
        for key, value in _flatten(data).items():
            try:
                set_key(cfg, key, value, f"in {p}")
            except ConfigError as e:
                e.file = str(p)
                raise
    for key, value in parse_overrides(overrides).items():
        set_key(cfg, key, value, "command-line override")
    validate(cfg)
    return cfg


def preset_file(given: str | Path) -> Path:
    """The file ``--config given`` names: a YAML file, or a shipped preset by name from anywhere (``tiny``,
    ``tiny.yaml``, ``config/tiny.yaml``: ``config.presets``); ConfigError listing the presets when neither."""
    path = preset_path(given)
    if path is not None:
        return path
    what = "a folder" if Path(given).is_dir() else "no such file"
    raise ConfigError(
        f"--config {given}: {what}, and no preset of that name; give a preset by name ({', '.join(preset_names())}; "
        "e.g. --config tiny) or the path of a YAML config file",
        file=given,
    )


def preset_chain(p: Path, inside: tuple[Path, ...] = ()) -> list[tuple[Path, dict]]:
    """The sections of preset ``p``, after those of the preset its top-level ``base:`` names (a path relative to
    ``p``'s folder, itself possibly with a base), in the order they apply."""
    if not p.is_file():
        raise ConfigError(f"config file {p} not found (presets live in config/*.yaml)", file=p)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {p} is not valid YAML: {e}", file=p) from None
    except UnicodeDecodeError:
        raise not_a_config_file(p) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a mapping of sections, got {type(data).__name__}", file=p)
    if "dataset_keypoints" in data or "keypoints" in data and "limbs" in data:
        raise ConfigError(
            f"--config {p} is a skeleton file, not a config: give it as data.skeleton={p} (with --config a preset, "
            "e.g. --config tiny, or a config file)",
            file=p,
        )
    base = data.pop("base", None)
    if base is None:
        return [(p, data)]
    if not isinstance(base, str) or not base:
        raise ConfigError(f"config file {p}: base must name a preset file, got {base!r}", file=p, key="base")
    base_path = p.parent / base
    if base_path.resolve() in (*inside, p.resolve()):
        raise ConfigError(f"config file {p}: base {base} leads back to {p.name} (a circle of presets)", file=p)
    return [*preset_chain(base_path, (*inside, p.resolve())), (p, data)]


def not_a_config_file(path: Path) -> ConfigError:
    """The error for a binary file given as ``--config``: what it is and, for a checkpoint, where it goes."""
    kind = file_kind(path)
    if kind.name in ("zip", "pickle"):
        return ConfigError(
            f"--config {path} is {kind.description} (a checkpoint?), not a YAML config: continue its run with "
            f"train.resume={path}, start from its weights with train.init_weights={path}, evaluate it with "
            + command("evaluate.coco_eval", f"--ckpt {path}"),
            file=path,
        )
    what = kind.description or "not text"
    return ConfigError(f"--config {path} is {what}, not a YAML config (presets: config/*.yaml)", file=path)


def config_from_dict(data: dict) -> Config:
    """Rebuild a config saved by ``to_dict`` (e.g. from a checkpoint); validated. Keys that earlier versions
    had (RETIRED_KEYS) are dropped."""
    cfg = Config()
    for key, value in _flatten(data).items():
        if key not in RETIRED_KEYS:
            set_key(cfg, key, value, "saved config")
    validate(cfg)
    return cfg


def with_overrides(cfg: Config, values: dict[str, Any], where: str) -> Config:
    """A validated copy of ``cfg`` with the dotted keys of ``values`` set (``cfg`` itself is unchanged)."""
    out = copy.deepcopy(cfg)
    for key, value in values.items():
        set_key(out, key, value, where)
    validate(out)
    return out


def parse_overrides(overrides: list[str] | None) -> dict[str, Any]:
    """``["train.lr=1e-4", ...]`` -> ``{"train.lr": 1e-4, ...}`` (values parsed as YAML; the last one wins). A list
    the shell split at a space (``train.freeze=[a,`` then ``b]``) is named as such."""
    out = {}
    words = list(overrides or [])
    for i, text in enumerate(words):
        before = words[i - 1] if i else ""
        if "=" not in text and before.count("[") > before.count("]"):
            whole = f"{before} {text}"
            raise ConfigError(
                f"{whole}: the shell split this list at its space; quote it ('{whole}') or write it without "
                f"spaces ({whole.replace(' ', '')})",
                key=before.split("=", 1)[0],
            )
        key, value = parse_override(text)
        out[key] = value
    return out


INPUT_SIZE_MULTIPLE = OUTPUT_STRIDE * 2**4  # the stem divides by 4, the hourglass's four poolings by 16


def check_input_size(size: int, key: str = "data.input_size") -> None:
    """ConfigError unless ``size`` is a network input size training accepts: a positive multiple of
    ``INPUT_SIZE_MULTIPLE`` (64: 64, 128, 192, 256, ...). The one rule for ``data.input_size`` and the converter's
    ``--input-size`` (``key``: the setting named in the message)."""
    m = INPUT_SIZE_MULTIPLE
    if isinstance(size, int) and not isinstance(size, bool) and size > 0 and size % m == 0:
        return
    valid = ", ".join(str(m * k) for k in range(1, 9))
    closest = ""
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        lower = max(m, size // m * m)
        closest = f"; the closest: {lower}" + (f" or {lower + m}" if lower < size else "")
    raise ConfigError(
        f"{key} must be a positive multiple of {m} (the network's output stride {OUTPUT_STRIDE} x 16 for its four "
        f"poolings), got {size!r} (valid sizes: {valid}, ...{closest})",
        key=key,
    )


def out_of_range(key: str, value: Any, limits: Range) -> ConfigError | None:
    """The error naming ``key``, its ``value`` and ``limits`` when the value is outside them; None when inside (and
    for None or a word such as ``auto``, which the type already checked)."""
    if isinstance(value, list):
        items_ok = len(value) >= limits.min_items and (limits.max_items is None or len(value) <= limits.max_items)
        if items_ok and all(limits.holds(v) for v in value):
            return None
        return ConfigError(f"{key} must be {limits.describe(is_list=True)}, got {value}", key=key)
    if value is None or isinstance(value, str) or limits.holds(value):
        return None
    return ConfigError(f"{key} must be {limits.describe()}, got {value}", key=key)


def check_ranges(section: Any, prefix: str) -> None:
    """ConfigError naming the first setting of the dataclass ``section`` (keys ``prefix.<field>``) out of its
    declared ``Range``."""
    for f in dataclasses.fields(section):
        limits = range_of(f)
        error = out_of_range(f"{prefix}.{f.name}", getattr(section, f.name), limits) if limits else None
        if error is not None:
            raise error


def validate(cfg: Config) -> None:
    """Every setting in its declared range (config.schema ``Range``), then the checks between settings. The input
    size first: its own check also names the valid sizes, as the converter's does."""
    check_input_size(cfg.data.input_size)
    for f in dataclasses.fields(cfg):
        check_ranges(getattr(cfg, f.name), f.name)
    m, loss = cfg.model, cfg.loss
    if len(loss.stack_weights) != m.stacks:
        raise ConfigError(
            f"loss.stack_weights has {len(loss.stack_weights)} entries but model.stacks is {m.stacks}; "
            f"give one weight per stack, e.g. loss.stack_weights=[{','.join(['1'] * m.stacks)}]",
            key="loss.stack_weights",
        )
    if len(loss.scale_weights) != m.num_scales:
        raise ConfigError(
            f"loss.scale_weights has {len(loss.scale_weights)} entries but model.num_scales is "
            f"{m.num_scales}; give one weight per output scale",
            key="loss.scale_weights",
        )
    check_sources(cfg.data)
    check_freeze(cfg.train.freeze)
    a = cfg.augment
    if a.scale_min > a.scale_max:
        raise ConfigError(
            f"augment.scale_min ({a.scale_min}) must be <= augment.scale_max ({a.scale_max})", key="augment.scale_min"
        )


def check_freeze(patterns: list[str]) -> None:
    """Each ``train.freeze`` entry is a regular expression (``re``), before a model is built."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ConfigError(
                f"train.freeze: {pattern!r} is not a regular expression ({e}); fix it, e.g. "
                "train.freeze=['^(?!.*(heads|merge))'] (quoted for the shell) freezes all but the heads and merges",
                key="train.freeze",
            ) from None


def check_sources(d: DataConfig) -> None:
    """The per-source lists each have one entry per ``data.train_sources`` entry (or none)."""
    n = len(d.train_sources)
    for key in ("source_weights", "source_val_images", "source_val_annotations"):
        given = getattr(d, key)
        if given and len(given) != n:
            raise ConfigError(
                f"data.{key} has {len(given)} entries but data.train_sources has {n}; give one per source, in the "
                "same order (or none)",
                key=f"data.{key}",
            )
    for i, (images, annotation_file) in enumerate(zip(d.source_val_images, d.source_val_annotations)):
        if bool(images) != bool(annotation_file):
            raise ConfigError(
                f"source {i} ({d.train_sources[i]}) has validation "
                f"{'images but no annotations' if images else 'annotations but no images'}; give both "
                "data.source_val_images and data.source_val_annotations for it, or neither ('')",
                key="data.source_val_annotations" if images else "data.source_val_images",
            )
    if bool(d.source_val_images) != bool(d.source_val_annotations):
        raise ConfigError(
            "data.source_val_images and data.source_val_annotations go together: give both (one entry per source) "
            "or neither",
            key="data.source_val_annotations" if d.source_val_images else "data.source_val_images",
        )


def check_track(track: TrackConfig) -> None:
    """ConfigError naming the first ``track.*`` setting out of its range (for a ``TrackConfig`` made in code)."""
    check_ranges(track, "track")


def to_dict(cfg: Any) -> dict:
    """A config, or one of its sections (``cfg.model``), as nested plain dicts."""
    return dataclasses.asdict(cfg)


def save_config(cfg: Config, path: str | Path) -> None:
    """Write the resolved config as YAML (atomically)."""
    atomic_write_text(path, yaml.safe_dump(to_dict(cfg), sort_keys=False))


def add_config_arguments(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """Add ``--config FILE`` and trailing ``key=value`` overrides to a command's parser. An option the command does
    not have whose name is a setting's (``--device cpu``, ``--batch-size 8``) is refused naming the override to use
    instead (``train.device=cpu``)."""
    parser.add_argument(
        "--config", default=default, help="a preset by name (e.g. tiny, simplepose_coco) or a YAML config file"
    )
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. train.lr=1e-4")
    parse_known_args = parser.parse_known_args

    def known_args_or_settings(args=None, namespace=None):
        words = sys.argv[1:] if args is None else list(args)
        parsed, extras = parse_known_args(words, namespace)
        hints = [h for h in (setting_for_option(words, e) for e in extras if e.startswith("-")) if h]
        if hints:
            raise ConfigError("; ".join(text for _, text in hints), key=hints[0][0])
        return parsed, extras

    parser.parse_known_args = known_args_or_settings  # type: ignore[method-assign]  # this parser's, wrapped


def setting_for_option(words: list[str], option: str) -> tuple[str, str] | None:
    """For an unknown ``option`` among the command's ``words`` whose name is a config setting's (``--device``,
    ``--batch-size``, ``--train.lr``): (the first key it may mean, the sentence naming the ``key=value`` override(s) to
    give instead)."""
    name, given, value = option.lstrip("-").partition("=")
    if not given:
        i = words.index(option)
        after = words[i + 1] if i + 1 < len(words) else "-"
        value = after if not after.startswith("-") and "=" not in after else "VALUE"
    keys = keys_named(name.replace("-", "_"))
    if not keys:
        return None
    instead = " or ".join(f"{k}={value}" for k in keys)
    return keys[0], f"{option} is not an option of this command; settings are given as key=value: {instead}"


def keys_named(name: str) -> list[str]:
    """The dotted keys a name stands for: the key itself (``train.lr``), else every key whose last part it is."""
    keys = all_keys()
    if name in keys:
        return [name]
    return [k for k in keys if k.rsplit(".", 1)[-1] == name]


def config_from_args(args: argparse.Namespace) -> Config:
    return load_config(args.config, args.overrides)
