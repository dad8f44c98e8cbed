"""OpenMP settings that must be in place before torch loads (GNU OpenMP reads them when its library loads).

On a CPU with as many busy threads as cores, an idle OpenMP thread's default spin-wait (about 300,000 iterations)
burns the core a neighbouring process needs, and every barrier of the network then waits for a thread that is not
running: on 2 cores a busy neighbour made float32 training steps several times slower. A short spin
(GOMP_SPINCOUNT=1000) costs little on an idle machine and recovers much of that loss (docs/benchmarks.md#cpu-threads
has the table).
"""

from __future__ import annotations

import os

SHORT_SPIN = "1000"


def prefer_short_spin() -> None:
    """Set GOMP_SPINCOUNT to SHORT_SPIN unless the user chose a wait policy or spin count; call before importing
    torch (later calls change nothing in this process)."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = SHORT_SPIN
