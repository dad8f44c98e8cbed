"""setuptools' build backend, with editable installs in its ``strict`` mode (pyproject's ``[build-system]``).

The checkout's root is the package ``simplepose`` (``package-dir = {"simplepose" = "."}``). setuptools' default
editable install maps that name to the root with an import hook, which type checkers and editors never run, so
they could not resolve ``simplepose.*``. In ``strict`` mode it builds a link tree instead,
``build/__editable__.simplepose-<version>-py3-none-any/simplepose/``, whose files are links to the checkout's (an edit
takes effect at once; a new module appears after ``pip install -e .`` again), and puts that folder on ``sys.path``
with a ``.pth`` line, where static tools look. The tree holds what the wheel holds: nothing of ``tests/`` or ``bench/``.

Everything else is setuptools' own ``build_meta``; the same as ``pip install -e . --config-settings
editable_mode=strict``, made the default so that the README's install line is the only one.
"""

from __future__ import annotations

from setuptools import build_meta
from setuptools.build_meta import (  # noqa: F401 (the hooks a build frontend calls, unchanged)
    build_sdist,
    build_wheel,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """setuptools' editable wheel, in ``strict`` mode unless the caller chose a mode."""
    settings = {"editable_mode": "strict", **(config_settings or {})}
    return build_meta.build_editable(wheel_directory, settings, metadata_directory)
