"""Entry point kept for `python -m evaluator.confine`: the module is `evaluator.containment.confine`."""

# evaluator-reorg: entry point kept at the old path
import runpy

if __name__ == "__main__":
    runpy.run_module("evaluator.containment.confine", run_name="__main__", alter_sys=True)
