"""Robustness harness: broken inputs, injected faults, killed or starved runs, sent through the real commands.

- ``cases``: a case (a command and the outcome it should end in), running it and classifying the result;
- ``bad_inputs``: the bad-input corpus derived from a COCO-format sample (the tests' synthetic one, or the real one);
- ``faults``: fault injection from outside (kill -9, torchrun worker death, full or read-only disk, loader faults);
- ``faulty_trainer``: a training hook that injects faults from inside (NaN loss, a dying, hanging or out-of-memory
  step, a crash between micro-batches);
- ``bad_input_table``, ``fault_table``: the commands that run them all and print one table each
  (``python -m tests.harness.bad_input_table``, ``python -m tests.harness.fault_table``).

The tests assert what these give (test_bad_inputs.py, test_security.py, test_faults.py, ...). Nothing outside
tests/ imports them.
"""
