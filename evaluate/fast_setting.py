"""The fast test-time setting for CPUs: one scale (1.0), no flip (a single forward pass per image) and
``eval.amp=auto`` (bf16 where the CPU computes it natively, with channels_last there; float32 elsewhere).

    estimator = PoseEstimator.from_checkpoint("runs/quickstart/best.pt", **FAST)   # the API
    python -m simplepose.evaluate.demo --ckpt runs/quickstart/best.pt --input photos --fast     # the demo

What it costs and gains, measured (the quick-start model on the synthetic validation split; the paper network on
real photos): docs/benchmarks.md#inference-on-the-cpu. Later ``eval.*`` overrides win over it.
"""

from __future__ import annotations

FAST: dict = {"scales": [1.0], "flip": False, "amp": "auto"}  # EvalConfig fields


def fast_overrides() -> list[str]:
    """``FAST`` as ``key=value`` config overrides (``eval.scales=[1.0]``, ``eval.flip=false``, ``eval.amp=auto``)."""
    return [f"eval.{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in FAST.items()]
