"""``python -m models.convert_original``: the converter's documented command, kept at this path for users' command
lines. The converter itself is ``checkpoint.original`` (it writes a checkpoint, which stands above the models)."""

from checkpoint.original import main

if __name__ == "__main__":
    raise SystemExit(main())
