"""The console command ``simplepose``: one subcommand per command of the package, each its module's ``main``.

    simplepose --help                       # the subcommands, one line each
    simplepose train --config my.yaml       # the launcher train.py, as the checkout runs it
    simplepose demo --help                  # the module's own help
    torchrun --nproc_per_node=4 -m simplepose train-distributed --config my.yaml

The subcommands are ``simplepose.utils.commands.SUBCOMMANDS``; a subcommand whose module this installation lacks
(the runtime distribution has no training) says which install brings it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from simplepose import __version__
from simplepose.utils.commands import COMMAND, FULL_INSTALL, PACKAGE, SUBCOMMANDS, Subcommand, console
from simplepose.utils.errors import UserError, cli_main


def installed(sub: Subcommand) -> bool:
    """Whether this installation holds ``sub``'s module (found without importing it: no torch loads)."""
    try:
        return importlib.util.find_spec(f"{PACKAGE}.{sub.module}") is not None
    except ModuleNotFoundError:  # its package is missing too
        return False


def parser() -> argparse.ArgumentParser:
    lacking = [] if all(installed(s) for s in SUBCOMMANDS) else [f"[full install]: {FULL_INSTALL} (with PyTorch)"]
    p = argparse.ArgumentParser(
        prog=console(),
        description="Simple Pose: bottom-up multi-person pose estimation. Each subcommand's --help gives its options.",
        epilog="\n".join(
            [f"config overrides: key=value after the options, e.g. {console()} train train.epochs=10"] + lacking
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"{COMMAND} {__version__}")
    p.add_argument(
        "--completion",
        choices=["bash"],
        help=f'print a shell completion script: eval "$({COMMAND} --completion bash)" in ~/.bashrc',
    )
    subs = p.add_subparsers(title="subcommands", metavar="SUBCOMMAND")
    for sub in SUBCOMMANDS:
        note = "" if installed(sub) else " [full install]"
        subs.add_parser(sub.name, help=sub.summary + note, add_help=False)
    return p


@cli_main
def check(sub: Subcommand, argv: list[str]) -> None:
    """One line when this installation lacks ``sub``'s module, or its arguments lack what it is for."""
    if not installed(sub):
        raise UserError(f"{console()} {sub.name} needs the full install (PyTorch): {FULL_INSTALL}")
    asks_help = "-h" in argv or "--help" in argv
    if sub.name == "diagnose" and not asks_help and not any(a.split("=")[0] == "--diagnose" for a in argv):
        raise UserError(f"{console()} diagnose: give --diagnose DIR, the folder for the diagnosis (see --help)")


def run_subcommand(sub: Subcommand, argv: list[str]) -> int:
    """``sub``'s module's ``main(argv)`` (itself a command: its errors are its own lines)."""
    rc = check(sub, argv)
    if rc:
        return rc
    main = importlib.import_module(f"{PACKAGE}.{sub.module}").main
    return int(main(argv) or 0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sub = next((s for s in SUBCOMMANDS if argv and s.name == argv[0]), None)
    if sub is not None:
        return run_subcommand(sub, argv[1:])
    p = parser()
    if not argv:
        p.print_help()
        return 0
    args = p.parse_args(argv)  # --help, --version, --completion, or an unknown subcommand (argparse names them)
    if args.completion:
        print(bash_completion())
        return 0
    return 2


def bash_completion() -> str:
    """A bash completion for the console command: the subcommands and options as the first word, then file names
    (the subcommands' own options are in their --help)."""
    words = " ".join([*(s.name for s in SUBCOMMANDS), "--help", "--version", "--completion"])
    function = f"_{COMMAND.replace('-', '_')}_complete"
    return (
        f"{function}() {{\n"
        '    local word="${COMP_WORDS[COMP_CWORD]}"\n'
        f'    if [ "$COMP_CWORD" -eq 1 ]; then COMPREPLY=($(compgen -W "{words}" -- "$word"));\n'
        '    else COMPREPLY=($(compgen -f -- "$word")); fi\n'
        "}\n"
        f"complete -o filenames -F {function} {COMMAND}"
    )
