"""A map source computed once per input: decoders compared on the same maps without running the network (or the
oracle's drawing) again for each."""

from __future__ import annotations

import torch

from simplepose.evaluate.inference.map_source import InputBatch, MapSource


def cached(source: MapSource) -> MapSource:
    """``source`` computed once per input shape and images' transforms: one forward per image and test scale,
    whatever the number of decoding grids asked of it."""
    memo: dict[tuple, torch.Tensor] = {}

    def run(batch: InputBatch) -> torch.Tensor:
        key = (tuple(batch.pixels.shape), batch.metas)
        if key not in memo:
            memo[key] = source(batch)
        return memo[key]

    return run
