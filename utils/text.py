"""Words of the commands' messages."""

from __future__ import annotations


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun in the number it takes: ``1 person``, ``2 people``, ``0 images`` (plural: ``singular + 's'``
    unless given)."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"
