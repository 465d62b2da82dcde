"""The judge split in two processes: a trusted verifier and an untrusted runner.

The sandbox child (`evaluator.judge.verifier`) is the verifier: it draws inputs, computes eager
references, compares and writes the verdict lines. Before it computes anything it forks the runner
(`runner.py`), which closes every inherited descriptor but its channel, imports the kernel and
calls it on copies of the inputs it receives (`channel.py`). Everything the runner sends back is
hostile input: `outputs.py` validates it (schema, sizes, dtypes, plain dense tensors) and the
runner's own guard reports can only make a verdict worse.

The verifier's own modules: `verifier.py` (the job driver), `results_file.py` (key, signed
lines), `references.py` (inputs and eager references), `case_checks.py` (one test's calls and
checks, the ghost replay), `timed_check.py` (the timed output and derived numbers). The runner
calls the kernel through `calling.py` (guards, import, one guarded call) and reads the spec
through `spec_view.py`; it imports none of the verifier's own modules.
"""
