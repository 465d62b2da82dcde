"""Entry point kept for `python -m evaluator.opinfo_suite`: the module is `evaluator.cases.opinfo_suite`."""

# evaluator-reorg: entry point kept at the old path
import runpy

if __name__ == "__main__":
    runpy.run_module("evaluator.cases.opinfo_suite", run_name="__main__", alter_sys=True)
