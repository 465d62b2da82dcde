"""Entry point kept for `python -m evaluator.harness`: the module is `evaluator.judge.verifier`."""

# evaluator-reorg: entry point kept at the old path
import runpy

if __name__ == "__main__":
    runpy.run_module("evaluator.judge.verifier", run_name="__main__", alter_sys=True)
