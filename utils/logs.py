"""Where the library's log messages go: nowhere but warnings until a program says otherwise.

Library modules log through ``logging.getLogger(__name__)`` and never print. The command-line entry points (every
``main`` wrapped in ``utils.errors.cli_main``) log to the terminal while they run (``terminal_logging``): information
on stdout, warnings and errors on stderr prefixed ``warning:`` / ``error:``, written through tqdm so that progress
bars stay intact.

A program using ``PoseEstimator`` or ``Trainer`` sees only warnings (Python's default); it can show the rest with
``setup_logging()`` or its own handlers, and quiet the project with
``logging.getLogger("simplepose").setLevel(logging.WARNING)`` (or one part: ``simplepose.engine``, ...).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

from tqdm import tqdm

# the loggers' top-level names: the package's import name (every module logs as getLogger(__name__))
PACKAGES = (__name__.partition(".")[0],)
_PREFIX = {logging.WARNING: "warning: ", logging.ERROR: "error: ", logging.CRITICAL: "error: "}


class TerminalHandler(logging.Handler):
    """INFO and below to stdout, WARNING and above to stderr (prefixed), through ``tqdm.write``. The streams are
    looked up at every record, so a redirected or captured ``sys.stdout`` is honoured."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = _PREFIX.get(record.levelno, "") + self.format(record)
            stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
            tqdm.write(text, file=stream)
            stream.flush()
        except Exception:  # noqa: BLE001  logging must never take the program down
            self.handleError(record)


def setup_logging(level: int = logging.INFO) -> None:
    """Send the project's log records of ``level`` and above to the terminal (and other libraries' warnings);
    calling it again replaces the handler instead of adding one."""
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, TerminalHandler)]:
        root.removeHandler(h)
    root.addHandler(TerminalHandler())
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    for name in PACKAGES:
        logging.getLogger(name).setLevel(level)


@contextlib.contextmanager
def terminal_logging(level: int = logging.INFO) -> Iterator[None]:
    """``setup_logging`` for the duration of a command (``utils.errors.cli_main``): afterwards the handlers and levels
    are as they were, so a program (or a test) that calls a command's ``main`` keeps its own logging."""
    root = logging.getLogger()
    before = (list(root.handlers), root.level, {n: logging.getLogger(n).level for n in PACKAGES})
    setup_logging(level)
    try:
        yield
    finally:
        root.handlers[:] = before[0]
        root.setLevel(before[1])
        for name, lvl in before[2].items():
            logging.getLogger(name).setLevel(lvl)
