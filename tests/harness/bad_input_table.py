"""Bad-input corpus: every kind of broken or odd input, derived from the real COCO sample (the tests' synthetic
sample when it is not found), run through the real command that would consume it, and classified.

    python -m tests.harness.bad_input_table [--work-dir DIR] [--jobs 2]

Each case edits a copy of the sample's annotation JSON, images, a converted HDF5 file or a checkpoint, then runs
``python -m data.coco_to_hdf5``, ``python train.py`` (tiny config) or ``python -m evaluate.coco_eval --ckpt`` in a
subprocess. Prints one line per case (``ok`` or ``FAIL``, its outcome: ``clean_error``, ``counted_skip``,
``raw_traceback`` or ``accepted``, as tests.harness.cases defines them, and ``PARTIAL OUTPUT`` when a failed
run left its output or a temporary file behind), then the totals.

The cases are tests.harness.bad_inputs (tests/test_bad_inputs.py and tests/test_security.py assert the same ones).
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

from simplepose.utils.errors import cli_main
from tests.harness.bad_inputs import CASE_NAMES, build_corpus, corpus_sample
from tests.harness.cases import OUTCOMES, Case, CaseResult, run_cases


def print_report(cases: list[Case], results: list[CaseResult]) -> int:
    """One line per case, then the totals; returns how many cases did not end as expected."""
    width = max(map(len, CASE_NAMES))
    wrong = 0
    for case, r in zip(cases, results):
        ok = r.outcome == case.expected and not r.partial_output
        wrong += not ok
        partial = " PARTIAL OUTPUT" if r.partial_output else ""
        print(f"{'ok  ' if ok else 'FAIL'} {r.name:<{width}}  {r.outcome:<13}{partial}  {case.what}: {r.message[:150]}")
    totals = Counter(r.outcome for r in results)
    print(
        f"{len(results)} cases: "
        + ", ".join(f"{totals[o]} {o}" for o in OUTCOMES)
        + f"; {sum(r.partial_output for r in results)} with partial output; {wrong} not as expected"
    )
    return wrong


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.harness.bad_input_table", description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", type=Path, help="where to build the corpus (default: a temporary folder)")
    p.add_argument("--jobs", type=int, default=2, help="cases run at the same time")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        cases = build_corpus(corpus_sample(work), work / "corpus")
        results = run_cases(cases, args.jobs)
    return 1 if print_report(cases, results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
