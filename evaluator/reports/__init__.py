"""Reports: run folders, the results report, the BackendBench-style report and plots."""
