"""``python -m simplepose SUBCOMMAND ...``: the console command ``simplepose`` (``simplepose.cli``), for where it
is not on PATH, and for torchrun: ``torchrun --nproc_per_node=4 -m simplepose train-distributed ...``."""

from simplepose.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
