"""Errors meant for the user, and the guard that turns them into a clean message and exit code."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable


class UserError(Exception):
    """Bad input from the user (file, annotation, config, checkpoint). The message says what and what to do."""


def cli_main(fn: Callable[..., int | None]) -> Callable[..., int]:
    """Wrap a command's ``main``: a ``UserError`` prints ``error: <message>`` and exits with status 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs) -> int:
        try:
            rc = fn(*args, **kwargs)
        except UserError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        return int(rc or 0)

    return wrapper
