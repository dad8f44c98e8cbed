"""Robustness harness: broken inputs and killed or starved runs, sent through the real commands.

- ``harness.cases``: a case (a command and the outcome it should end in), running it and classifying the result;
- ``harness.bad_inputs``: the bad-input corpus derived from the real COCO sample;
- ``harness.faults``: fault injection (kill -9, torchrun worker death, full or read-only disk, loader faults).

tests/ asserts what these give (test_bad_inputs.py, test_security.py, test_faults.py); ``python -m
bench.bad_inputs`` and ``python -m bench.faults`` print them as tables. The harness lives outside tests/ because
those commands use it and shipped code never imports the test suite (tests/test_layout.py).
"""
