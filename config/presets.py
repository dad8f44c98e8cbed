"""Presets by name: the YAML files shipped in the package's ``config/`` folder, found from any working directory,
in a checkout or an installed package alike (``importlib.resources``).

    preset_path("tiny")                 # the package's config/tiny.yaml
    preset_path("tiny.yaml")            # the same; also "config/tiny.yaml" from a folder without such a file
    preset_path("my_run.yaml")          # a file of the user's, as given, when it exists
    preset_names()                      # ('quickstart', 'simplepose_coco', ...)

A path that names an existing file is that file; otherwise a bare name, a name with ``.yaml`` / ``.yml``, or
``config/NAME.yaml`` is the shipped preset of that name. ``config.config_file.load_config`` refuses anything
else, listing the presets.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_SUFFIXES = (".yaml", ".yml")


def preset_folder() -> Path:
    """The folder of the shipped presets (the package's ``config/``)."""
    return Path(str(resources.files(__package__ or "")))


def preset_names() -> tuple[str, ...]:
    """The shipped presets' names, sorted (the files' names without ``.yaml``)."""
    return tuple(sorted(p.stem for p in preset_folder().glob("*.yaml")))


def preset_path(given: str | Path) -> Path | None:
    """The preset file ``given`` means (module docstring), or None when none fits (the caller refuses it, listing
    ``preset_names``)."""
    path = Path(given)
    if path.is_file():
        return path
    if path.suffix.lower() in (*_SUFFIXES, "") and path.parent.as_posix() in (".", "config"):
        shipped = preset_folder() / f"{path.stem if path.suffix else path.name}.yaml"
        if shipped.is_file():
            return shipped
    return None
