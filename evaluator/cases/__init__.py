"""Suites and traces: the cases an operator is tested on, their input tensors, the files they are read from and written to, and the model zoo traces are recorded from."""
