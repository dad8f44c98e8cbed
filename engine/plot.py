"""Training curves from a run's metrics file.

simplepose plot RUN_DIR [--out curves.png]
"""

from __future__ import annotations

import argparse

from simplepose.engine.curves import plot_run
from simplepose.utils.commands import command, commands_here
from simplepose.utils.errors import cli_main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=command("engine.plot"),
        description=commands_here(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir")
    parser.add_argument("--out", default=None, help="PNG path (default RUN_DIR/curves.png)")
    return parser


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    print(plot_run(args.run_dir, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
