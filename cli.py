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
from collections.abc import Callable
from types import ModuleType

from simplepose import __version__
from simplepose.utils import commands
from simplepose.utils.commands import COMMAND, FULL_INSTALL, PACKAGE, SUBCOMMANDS, Subcommand, console
from simplepose.utils.errors import UserError, cli_main


def parser() -> argparse.ArgumentParser:
    complete = all(commands.installed(s.module) for s in SUBCOMMANDS)
    lacking = [] if complete else [f"[full install]: {FULL_INSTALL} (with PyTorch)"]
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
        note = "" if commands.installed(sub.module) else " [full install]"
        subs.add_parser(sub.name, help=sub.summary + note, add_help=False)
    return p


@cli_main
def check(sub: Subcommand, argv: list[str]) -> None:
    """One line when this installation lacks ``sub``'s module, or its arguments lack what it is for."""
    if not commands.installed(sub.module):
        raise UserError(f"{console()} {sub.name} needs the full install (PyTorch): {FULL_INSTALL}")
    asks_help = "-h" in argv or "--help" in argv
    if sub.name == "diagnose" and not asks_help and not any(a.split("=")[0] == "--diagnose" for a in argv):
        raise UserError(f"{console()} diagnose: give --diagnose DIR, the folder for the diagnosis (see --help)")


def command_module(sub: Subcommand) -> ModuleType:
    """``sub``'s module, or for a package (``models``) its ``__main__``, as ``python -m`` runs it: its ``main(argv)``
    parses ``argv`` with its ``build_parser()``."""
    module = importlib.import_module(f"{PACKAGE}.{sub.module}")
    if not hasattr(module, "main") and hasattr(module, "__path__"):
        module = importlib.import_module(f"{module.__name__}.__main__")
    return module


def main_of(sub: Subcommand) -> Callable[[list[str]], int | None]:
    """``sub``'s ``main``."""
    return command_module(sub).main


def parser_of(sub: Subcommand) -> argparse.ArgumentParser:
    """The argument parser ``sub``'s ``main`` parses with: its module's ``build_parser()``."""
    return command_module(sub).build_parser()


def run_subcommand(sub: Subcommand, argv: list[str]) -> int:
    """``sub``'s module's ``main(argv)`` (itself a command: its errors are its own lines)."""
    rc = check(sub, argv)
    if rc:
        return rc
    return int(main_of(sub)(argv) or 0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--complete":  # the bash completion's question (bash_completion): not in --help
        print(completion_table(argv[1]))
        return 0
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


def completion_table(name: str) -> str:
    """What the bash completion offers after ``simplepose NAME``, a line each: every option with its choices
    (``--keypoint-names exact spelling position``; ``--out *``: any file; ``--overwrite``: no value), then ``=``
    and the config keys (``train.epochs=``) where the command takes ``key=value`` overrides; nothing for a
    subcommand this installation lacks."""
    from simplepose.config.config_file import all_keys

    sub = next((s for s in SUBCOMMANDS if s.name == name), None)
    if sub is None or not commands.installed(sub.module):
        return ""
    lines = []
    for action in parser_of(sub)._actions:  # argparse names its actions through no public attribute
        choices = " ".join(map(str, action.choices or ())) or ("" if action.nargs == 0 else "*")  # *: files
        lines += [f"{option} {choices}".rstrip() for option in action.option_strings]
        if action.dest == "overrides":  # config.config_file.add_config_arguments
            lines.append(" ".join(["=", *(f"{key}=" for key in all_keys())]))
    return "\n".join(lines)


# COMP_WORDS splits "--option=value" at "=", so "=" and the word before it are looked through
_BASH = """FUNCTION() {
    local word="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" table choices options keys
    if [ "$COMP_CWORD" -eq 1 ]; then COMPREPLY=($(compgen -W "FIRST" -- "$word")); return; fi
    [ "$word" = "=" ] && word=""
    [ "$prev" = "=" ] && prev="${COMP_WORDS[COMP_CWORD-2]}"
    local cache="FUNCTION_${COMP_WORDS[1]//[^a-z]/_}"
    [ -n "${!cache+x}" ] || printf -v "$cache" "%s" "$(COMMAND --complete "${COMP_WORDS[1]}" 2>/dev/null)"
    table="${!cache}"
    choices=$(printf "%s\\n" "$table" | awk -v o="$prev" '$1 == o && o ~ /^-/ {$1 = ""; print}')
    options=$(printf "%s\\n" "$table" | awk '/^-/ {print $1}')
    keys=$(printf "%s\\n" "$table" | awk '$1 == "=" {$1 = ""; print}')
    if [ "$choices" = " *" ]; then COMPREPLY=($(compgen -f -- "$word"))
    elif [ -n "$choices" ]; then COMPREPLY=($(compgen -W "$choices" -- "$word"))
    elif [[ "$word" == -* ]]; then COMPREPLY=($(compgen -W "$options" -- "$word"))
    else
        COMPREPLY=($(compgen -f -- "$word") $(compgen -W "$keys" -- "$word"))
        if [[ ${#COMPREPLY[@]} -eq 1 && "${COMPREPLY[0]}" == *= ]] && type compopt &>/dev/null; then
            compopt -o nospace 2>/dev/null  # a key: its value follows the "="
        fi
    fi
}
complete -o filenames -F FUNCTION COMMAND"""


def bash_completion() -> str:
    """A bash completion for the console command: the subcommands as the first word; then a subcommand's options,
    an option's choices, files and config keys (``key=``), from ``COMMAND --complete SUB`` (``completion_table``),
    asked once per subcommand in a shell and kept there: the training commands' parsers load torch, seconds."""
    first = " ".join([*(s.name for s in SUBCOMMANDS), "--help", "--version", "--completion"])
    function = f"_{COMMAND.replace('-', '_')}_complete"
    return _BASH.replace("FUNCTION", function).replace("FIRST", first).replace("COMMAND", COMMAND)
