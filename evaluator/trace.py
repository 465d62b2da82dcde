"""Entry point kept for `python -m evaluator.trace`: the module is `evaluator.cases.trace`."""

# evaluator-reorg: entry point kept at the old path
import runpy

if __name__ == "__main__":
    runpy.run_module("evaluator.cases.trace", run_name="__main__", alter_sys=True)
