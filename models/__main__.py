"""Print a model summary: parameters (total and per part), output shapes and MACs per image.

simplepose summary --config config/simplepose_coco.yaml
simplepose summary --config config/quickstart.yaml data.input_size=320
"""

from __future__ import annotations

import argparse

from simplepose.config.config_file import add_config_arguments, config_from_args
from simplepose.config.skeleton_file import skeleton_of
from simplepose.models.summary import macs_and_shapes, meta_model, parameter_counts
from simplepose.utils.commands import command
from simplepose.utils.errors import cli_main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=command("models"), description="Summary of the configured network.")
    add_config_arguments(parser)
    return parser


@cli_main
def main(argv: list[str] | None = None) -> int:
    cfg = config_from_args(build_parser().parse_args(argv))
    m, size, skeleton = cfg.model, cfg.data.input_size, skeleton_of(cfg)
    print(
        f"PoseNet: stacks={m.stacks} inp_dim={m.inp_dim} increase={m.increase} num_scales={m.num_scales} "
        f"head_channels={m.head_channels} se_reduction={m.se_reduction} bn={m.bn}; skeleton {skeleton.describe()}"
    )
    counts = parameter_counts(meta_model(m, skeleton))
    for part, n in counts.items():
        print(f"  {part:<12} {n:>13,} parameters")
    macs, shapes = macs_and_shapes(m, size, size, skeleton)
    print(f"input (B, 3, {size}, {size}) -> outputs[stack][scale], {m.stacks} stacks of:")
    for k, s in enumerate(shapes):
        print(f"  scale {k}: (B, {s[1]}, {s[2]}, {s[3]})  stride {size // s[2]}")
    print(f"cost: {macs / 1e9:.2f} G multiply-accumulates per image at {size}x{size}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
