"""Entry point kept for `python -m evaluator.model_check`: the module is `evaluator.models.model_check`."""

# evaluator-reorg: entry point kept at the old path
import runpy

if __name__ == "__main__":
    runpy.run_module("evaluator.models.model_check", run_name="__main__", alter_sys=True)
