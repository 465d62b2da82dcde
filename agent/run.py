"""`python -m agent.run`: write Triton kernels for ATen operators, keep the ones that pass, evaluate.

Thin on purpose: parse flags, load the config (flags override a few fields), call
`agent.session.Session`, map errors to exit codes:
    0  the run completed (whatever the kernels scored)
    2  a usage or configuration error: one line `error: ...` on stderr, no traceback
    1  an internal failure (a bug): one line, the traceback with -v/--debug
    3  the run stopped calling the provider (calls kept failing: a server down for longer than
       provider.outage_wait_s, a bad key, a model the server does not know): the reports are
       written, operators it could not finish are not decided; fix the cause, then --resume
  130  interrupted (Ctrl-C): workers stopped, sandboxes killed, logs flushed, resume command printed
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from pathlib import Path
from typing import Any, NoReturn

from evaluator.errors import UsageError

log = logging.getLogger("agent.run")

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_PROVIDER = 3  # the run stopped calling the provider; --resume finishes it
# Flags that choose *what* a run works on: a resumed run keeps its own.
SELECTION_FLAGS = ("suite", "ops", "num_operators", "trace_file", "config")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse would print the usage block and exit itself: we want one line and exit code 2.
        raise UsageError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m agent.run",
        description=(
            "Write Triton kernels for PyTorch ATen operators with N workers per operator, keep the "
            "first kernel that passes every test, then evaluate every selected operator. Flags "
            "override the config (configs/default.toml, then --config); API keys come only from "
            "the environment."
        ),
        epilog=(
            "exit codes: 0 run completed, 1 internal error, 2 usage or config error, "
            "3 the provider stopped answering (reports written; resume with --resume RUN_DIR once "
            "it is back), 130 interrupted (resume with --resume RUN_DIR)"
        ),
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--generate-only",
        action="store_true",
        help="only write kernels; do not evaluate them afterwards",
    )
    mode.add_argument(
        "--evaluate-only",
        action="store_true",
        help="only evaluate the kernels already in --kernels-dir (no provider, no generation)",
    )

    sel = p.add_argument_group("what to work on")
    sel.add_argument(
        "--suite",
        metavar="NAME",
        help="operator suite: smoke, torchbench or opinfo (default: torchbench)",
    )
    sel.add_argument(
        "--ops",
        metavar="OPS",
        help="comma-separated overloads (add.Tensor) or base names (add = all its overloads)",
    )
    sel.add_argument(
        "--num-operators", type=int, metavar="N", help="take the N most used operators of the suite"
    )
    sel.add_argument(
        "--trace-file", metavar="PATH", help="a BackendBench-format trace file instead of a suite"
    )
    sel.add_argument(
        "--kernels-dir",
        metavar="DIR",
        help="where kept kernels go, and what --evaluate-only evaluates (default: generated_kernels)",
    )

    prov = p.add_argument_group("who writes the kernels")
    prov.add_argument(
        "--provider",
        choices=["auto", "builtin", "openai", "anthropic", "replay"],
        help="auto (default) picks anthropic or openai when its API key is set, else builtin",
    )
    prov.add_argument(
        "--model", metavar="NAME", help="model name; default: the provider's default model"
    )
    prov.add_argument(
        "--replay-dir",
        metavar="RUN_DIR",
        help="replay provider: the recorded run folder to answer from",
    )

    loop = p.add_argument_group("the agent loop")
    loop.add_argument(
        "--config", metavar="TOML", help="a TOML config file merged over configs/default.toml"
    )
    loop.add_argument(
        "--num-workers",
        type=int,
        metavar="N",
        help="workers per operator, each its own conversation (default: 4)",
    )
    loop.add_argument(
        "--max-rounds", type=int, metavar="N", help="generate/test rounds per worker (default: 5)"
    )
    loop.add_argument(
        "--speed-rounds",
        type=int,
        metavar="N",
        help="rounds asking for a faster kernel once one passed (default: 3 on a GPU, 0 on the CPU)",
    )
    loop.add_argument(
        "--parallel-ops",
        type=_count_or_auto,
        metavar="N|auto",
        help="operators in flight at once; auto = enough to keep every judge busy (default: 2)",
    )
    loop.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="stop new provider calls once this many tokens were used",
    )
    loop.add_argument(
        "--max-cost-usd",
        type=float,
        metavar="USD",
        help="stop new provider calls once the estimated cost reaches this",
    )
    loop.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="seed for test inputs and sampling where the API takes one (default: 0)",
    )

    judge = p.add_argument_group("how kernels are judged")
    judge.add_argument(
        "--profile",
        choices=["strict", "backendbench"],
        help=(
            "strict (default): per-dtype tolerances, signed inputs, every operator scored; "
            "backendbench: BackendBench's tolerance, inputs and scoring"
        ),
    )
    judge.add_argument(
        "--kernel-file-glob",
        metavar="GLOB",
        help=(
            "which file of an operator's folder is judged: the first, sorted, matching GLOB "
            "({folder} = the folder's name; default {folder}_implementation*.py, as BackendBench)"
        ),
    )

    run = p.add_argument_group("where and how")
    run.add_argument(
        "--devices",
        metavar="all|N|0,1,3",
        help="judges: on a GPU all, the first N or these GPU indices (one fork server each); "
        "on the CPU N interpreter judges (default: 1)",
    )
    run.add_argument(
        "--executor",
        choices=["local", "ray"],
        help="local (default): judges run on this host; ray: judges are Ray actors",
    )
    run.add_argument(
        "--ray-address",
        metavar="auto|ray://HOST:PORT",
        help="--executor ray: the cluster to join (default: start a local Ray)",
    )
    run.add_argument("--log-dir", metavar="DIR", help="where run folders go (default: agent_logs)")
    run.add_argument(
        "--device",
        choices=["auto", "cuda", "cpu"],
        help="where candidates are tested: auto (default) = cuda when a GPU is visible, else cpu (Triton interpreter)",
    )
    run.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help=(
            "continue an interrupted run in its folder: decided operators are kept, the rest are "
            "done; its saved config is used, other flags (e.g. --max-tokens) override it"
        ),
    )
    run.add_argument(
        "--require-containment",
        action="store_true",
        default=None,
        help="refuse to judge candidates unless this machine confines them fully "
        "(python -m evaluator.confine --check shows what it offers)",
    )
    out = run.add_mutually_exclusive_group()
    out.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no live table; one line per operator and the final summary",
    )
    out.add_argument(
        "--verbose",
        "--debug",
        "-v",
        action="store_true",
        help="debug logging; tracebacks on errors",
    )
    return p


def _count_or_auto(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or auto, got {text!r}") from None


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The nested config keys the given flags set (flags left out change nothing)."""
    o: dict[str, Any] = {}

    def put(path: str, value: Any) -> None:
        if value is None:
            return
        *parents, leaf = path.split(".")
        node = o
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value

    ops = None
    if args.ops is not None:
        ops = [s.strip() for s in args.ops.split(",") if s.strip()]
        if not ops:
            raise UsageError("--ops is empty: pass operator names like add.Tensor,relu.")
    put("suite.suite", args.suite)
    put("suite.ops", ops)
    put("suite.num_operators", args.num_operators)
    put("suite.trace_file", args.trace_file)
    put("kernels_dir", args.kernels_dir)
    put("provider.name", args.provider)
    put("provider.model", args.model)
    put("provider.replay_dir", args.replay_dir)
    put("agent.num_workers", args.num_workers)
    put("agent.max_rounds", args.max_rounds)
    put("agent.parallel_ops", args.parallel_ops)
    put("agent.speed_rounds", args.speed_rounds)
    put("agent.max_tokens", args.max_tokens)
    put("agent.max_cost_usd", args.max_cost_usd)
    put("log_dir", args.log_dir)
    put("eval.devices", args.devices)
    put("eval.executor", args.executor)
    put("eval.ray_address", args.ray_address)
    put("device", args.device)
    put("eval.sandbox.require_containment", args.require_containment)
    put("seed", args.seed)
    put("eval.correctness.seed", args.seed)  # --seed also seeds the test inputs
    put("eval.correctness.tolerance_profile", args.profile)
    put("eval.kernel_file_glob", args.kernel_file_glob)
    return o


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            _merge(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out


def make_request(argv: list[str]) -> Any:
    """Flags -> a RunRequest (UsageError on a bad flag, combination or config value).

    The flags and the config are checked before anything heavy is imported (the session pulls in
    torch and triton, seconds on a busy machine): `--help` and a usage or config error answer at
    once.
    """
    args = build_parser().parse_args(argv)
    overrides = overrides_from_args(args)
    from agent.config import load_config

    if args.resume is None:
        cfg = load_config(args.config, overrides)
        from agent.session import RunRequest

        mode = "generate" if args.generate_only else "evaluate" if args.evaluate_only else "full"
        return args, RunRequest(cfg=cfg, mode=mode, argv=list(argv))
    given = [f for f in SELECTION_FLAGS if getattr(args, f) is not None]
    if args.generate_only or args.evaluate_only:
        given.append("generate_only" if args.generate_only else "evaluate_only")
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise UsageError(f"--resume continues the run as it was started: drop {flag}.")
    from agent.session import RunRequest, resume_config, saved_mode

    run_dir = Path(args.resume)
    saved = resume_config(run_dir)
    cfg = load_config(None, _merge(saved, overrides))
    return args, RunRequest(cfg=cfg, mode=saved_mode(run_dir), argv=list(argv), resume_dir=run_dir)


def _setup_logging(verbose: bool) -> None:
    from rich.logging import RichHandler

    handler = RichHandler(console=_stderr_console(), show_path=False, rich_tracebacks=False)
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        handlers=[handler],
        format="%(message)s",
        force=True,
    )


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _error_line(message: str) -> None:
    # One line, always: a multi-line message would read as a traceback.
    sys.stderr.write(f"error: {' '.join(str(message).split())}\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None, *, parts: Any = None, console: Any = None) -> int:
    """Run the CLI; returns the exit code. `parts` (agent.session.Parts) swaps the evaluator or the
    provider (tests)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = any(a in ("-v", "--verbose", "--debug") for a in argv)
    session = None
    try:
        from evaluator.containment.confine import make_undumpable, require_full_containment

        make_undumpable()  # API keys live in this process: no /proc/<pid>/environ for others
        args, request = make_request(argv)
        require_full_containment(request.cfg.eval.sandbox)
        _setup_logging(args.verbose)
        from rich.console import Console

        from agent.live import RunView
        from agent.session import Session

        console = console or Console(highlight=False)
        view = RunView(console, live=console.is_terminal and not args.quiet, quiet=args.quiet)
        session = Session(request, parts, view)
        result = session.run()
        view.final(result)
        why = _provider_stopped(result)
        if why:
            _error_line(f"stopped calling the provider: {why}")
            sys.stderr.write(
                f"Once it answers again, resume with: python -m agent.run --resume {result.run_dir}\n"
            )
            return EXIT_PROVIDER
        return EXIT_OK
    except UsageError as exc:
        if verbose:
            traceback.print_exc()
        _error_line(str(exc))
        if session is not None:
            session.finish("failed", error=str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        if session is None or session.run_dir is None:
            _error_line("interrupted before the run started")
            return EXIT_INTERRUPTED
        session.interrupt()
        session.finish("interrupted")
        sys.stderr.write(
            f"Interrupted. Resume with: python -m agent.run --resume {session.run_dir}\n"
        )
        return EXIT_INTERRUPTED
    except Exception as exc:
        if verbose:
            traceback.print_exc()
        hint = "" if verbose else " (run with -v for the traceback)"
        _error_line(f"internal error: {type(exc).__name__}: {exc}{hint}")
        if session is not None:
            session.finish("failed", error=f"{type(exc).__name__}: {exc}")
        return EXIT_INTERNAL


def _provider_stopped(result: Any) -> str:
    """Why operators were left undone because the provider gave no answers ("" when none were)."""
    if getattr(result, "provider_stop", None):
        return str(result.provider_stop)
    stopped = [o for o in getattr(result, "outcomes", []) if o.status == "provider_stopped"]
    return f"{stopped[0].op}: {stopped[0].reason}" if stopped else ""


if __name__ == "__main__":
    sys.exit(main())
