"""Errors meant for the user, and the guard that turns them into a clean message and exit code.

A ``UserError``'s message is for people (what is wrong, where, and what to do); its attributes are for programs
and tests, which should read those rather than match the prose:

    try:
        Checkpoint.load(path)
    except CheckpointError as e:
        e.file, e.key        # the file at fault, and the entry in it (None when the whole file is)

Subclasses live beside what they describe: ``config.config_file.ConfigError``, ``checkpoint.format.CheckpointError``,
``config.skeleton_check.SkeletonMismatch``, ``DataFileError`` and ``AnnotationError`` (below).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from pathlib import Path


class UserError(Exception):
    """Bad input from the user (file, annotation, config, checkpoint). The message says what and what to do.

    ``file``: the file at fault (a path as a string); ``key``: the entry at fault (a config key, a checkpoint
    entry, an annotation field, an HDF5 dataset); ``sample``: the sample index in a data file. None when the error
    is not about one."""

    def __init__(
        self, message: str = "", *, file: str | Path | None = None, key: str | None = None, sample: int | None = None
    ) -> None:
        super().__init__(message)
        self.file = str(file) if file is not None else None
        self.key = key
        self.sample = sample


class DataFileError(UserError):
    """A training data file (HDF5, made by ``data.coco_to_hdf5``) that cannot be used as it is: missing, damaged,
    made for another input size or format version, or a sample (``sample``) in it that cannot be loaded."""


class AnnotationError(UserError):
    """A COCO-format annotation file that cannot be read as it is; ``annotation_id`` / ``image_id`` name the entry as
    the file gives them (an annotation id may be a string; None when the file itself is at fault), ``key`` its
    field."""

    def __init__(
        self,
        message: str = "",
        *,
        file: str | Path | None = None,
        key: str | None = None,
        annotation_id: int | str | None = None,
        image_id: int | None = None,
    ) -> None:
        super().__init__(message, file=file, key=key)
        self.annotation_id = annotation_id
        self.image_id = image_id


class Stopped(Exception):
    """A command stopped on request (a signal, ``utils.stop_signals``): its one line (empty: another process says
    it) and its exit status (128 + the signal: 143 for SIGTERM, 130 for SIGINT)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def cli_main(fn: Callable[..., int | None]) -> Callable[..., int]:
    """Wrap a command's ``main``: while it runs, logging goes to the terminal (``utils.logs.terminal_logging``), and a
    ``UserError`` prints ``error: <message>`` and exits with status 2; Ctrl-C (``KeyboardInterrupt``) prints
    ``interrupted`` (with the exception's words, where the command gave some) and exits with status 130; a command
    stopped cleanly on a signal (``Stopped``) prints its line and exits with its status. A ``~`` starting a path among
    the arguments (``--ckpt ~/x.pt``, ``--out=~/x``, ``data.train=~/x.h5``) is expanded (``utils.user_paths``)."""

    takes_argv = next(iter(inspect.signature(fn).parameters), None) == "argv"  # main(argv)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs) -> int:
        from simplepose.utils.logs import terminal_logging
        from simplepose.utils.user_paths import expand_home

        if takes_argv and (not args or args[0] is None or isinstance(args[0], list)):  # its words, ~ expanded
            argv = args[0] if args else kwargs.pop("argv", None)
            args = ([expand_home(word) for word in (sys.argv[1:] if argv is None else argv)], *args[1:])
        with terminal_logging():
            try:
                rc = fn(*args, **kwargs)
            except UserError as e:
                # one write with its newline: the ranks of a torchrun group share stderr, and print's two writes
                # (text, then newline) let another rank's line land in between
                sys.stderr.write(f"error: {e}\n")
                sys.stderr.flush()
                return 2
            except Stopped as e:  # stopped cleanly on a signal, where it says
                if str(e):
                    sys.stderr.write(f"\n{e}\n")
                    sys.stderr.flush()
                return e.status
            except KeyboardInterrupt as e:  # Ctrl-C; a command may say where it stopped and how to go on
                sys.stderr.write(f"\ninterrupted: {e}\n" if str(e) else "\ninterrupted\n")
                sys.stderr.flush()
                return 130
        return int(rc or 0)

    return wrapper
