"""The `opinfo` suite: PyTorch's own OpInfo samples that dispatch exactly one ATen overload.

Contract:
    opinfo_cases() -> dict[str, list[TestCase]]   # normalized overload name -> cases (count 0)
    collect(opinfos) -> same, for a chosen subset of op_db (tests)

For every entry of `torch.testing._internal.common_methods_invocations.op_db`, its CPU samples (in
float32, or the first supported dtype of f32/i64/bool/f64/c64) are called once under a
`TorchDispatchMode`. A sample that reaches exactly one `aten` overload becomes a case of that
overload: the arguments the overload itself received, serialized with `serialize_case` (so it is
the ATen call, not the Python-level call, that is recorded). A case is kept only if it round-trips
through the parser, and `evaluator.cases.inputs.materialize` gives inputs the overload accepts on the
CPU and on which two eager calls agree (this drops random ops that no name list knows about).

Deterministic: every op's samples are drawn under `torch.manual_seed(0)` inside `fork_rng`, so the
caller's RNG state is untouched, and the result is sorted by name. The only file written is a cache
in the system temp dir (see `opinfo_cases`).

Cost: importing op_db takes ~6 s and needs the `expecttest` package (in the `test` extra);
collecting every sample takes about a minute on 2 CPU cores. `evaluator.cases.suites` imports this
module only when the opinfo suite is asked for.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator.cases import inputs as inputs_module
from evaluator.cases import testcase as testcase_module
from evaluator.cases.inputs import materialize
from evaluator.cases.testcase import (
    CaseSyntaxError,
    TestCase,
    format_trace,
    parse_case,
    parse_trace_text,
    serialize_case,
)
from evaluator.errors import UsageError
from evaluator.naming import normalize_op

log = logging.getLogger(__name__)

_DTYPES = (torch.float32, torch.int64, torch.bool, torch.float64, torch.complex64)
MAX_SAMPLES_PER_OPINFO = 16  # samples drawn per OpInfo entry (some generators yield >1000)
_EXIT_MISSING_MODULE = 3  # the child's exit code when op_db cannot be imported
MAX_CASES_PER_OP = 24  # distinct cases validated per overload (the suite caps lower anyway)


class _Recorder(TorchDispatchMode):
    """Records the top-level ATen calls of one sample (nested calls inside kernels are not seen)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[torch._ops.OpOverload, str | None]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        try:
            text: str | None = serialize_case(tuple(args), dict(kwargs))
        except TypeError:  # a value the format cannot hold (a Generator, a slice ...)
            text = None
        if any(_unsupported_tensor(v) for v in _flatten((args, kwargs))):
            text = None
        self.calls.append((func, text))
        return func(*args, **kwargs)


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return [x for v in value for x in _flatten(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _flatten(v)]
    return [value]


def _unsupported_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and (
        value.layout != torch.strided or value.is_quantized or value.device.type != "cpu"
    )


def _load_op_db() -> list[Any]:
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ModuleNotFoundError as exc:
        raise UsageError(
            f"the opinfo suite needs the {exc.name!r} package: pip install {exc.name} "
            "(it is in atenforge's test extra), or pick another suite."
        ) from None
    return list(op_db)


def _pick_dtype(opinfo: Any) -> torch.dtype | None:
    try:
        supported = opinfo.supported_dtypes("cpu")
    except Exception:  # noqa: BLE001 - an OpInfo that cannot answer is simply skipped
        return None
    return next((d for d in _DTYPES if d in supported), None)


def _record_one(opinfo: Any, sample: Any) -> tuple[str, str] | None:
    """(overload, serialized case) when the sample dispatches exactly one aten overload."""
    recorder = _Recorder()
    try:
        with recorder:
            opinfo.op(sample.input, *sample.args, **sample.kwargs)
    except Exception:  # noqa: BLE001 - samples meant to raise, or unsupported here
        return None
    if len(recorder.calls) != 1:
        return None
    func, text = recorder.calls[0]
    if text is None or func.namespace != "aten":
        return None
    return normalize_op(func.name()), text


def _usable(op: str, text: str) -> TestCase | None:
    """The parsed case if it round-trips and our materialised inputs run deterministically."""
    try:
        case = parse_case(text)
    except CaseSyntaxError:
        return None
    if case.serialize() != text:
        return None
    base, _, overload = op.partition(".")
    fn = getattr(getattr(torch.ops.aten, base), overload)
    try:
        results = []
        for _ in range(2):
            args, kwargs = materialize(op, case, "cpu", seed=0)
            results.append(fn(*args, **kwargs))
    except Exception:  # noqa: BLE001 - inputs outside the op's domain (e.g. needs a PD matrix)
        return None
    try:
        return case if _same(*results) else None
    except (RuntimeError, TypeError):  # outputs we cannot compare bitwise (nested, sparse ...)
        return None


def _same(a: Any, b: Any) -> bool:
    """Bitwise equality of two eager results (NaNs in the same places compare equal)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bool(torch.equal(_bits(a), _bits(b)))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b or (a != a and b != b)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


@functools.lru_cache(maxsize=2)
def opinfo_cases(use_cache: bool = True) -> dict[str, list[TestCase]]:
    """Cases per ATen overload from all of op_db (see module doc); computed once per process.

    The collection runs in a child Python with CUDA hidden: importing op_db and running samples
    change process state (env vars, warning filters, possibly a CUDA context, which would forbid
    the evaluator from forking sandboxes). The child writes a trace file; with `use_cache` that
    file is kept in the system temp dir, keyed by the torch version and the source of this module,
    `evaluator.cases.inputs` and `evaluator.cases.testcase` (which decide the result).
    """
    path = _cache_path()
    if use_cache and path.is_file():
        trace = parse_trace_text(path.read_text(encoding="utf-8"), origin=str(path))
        if not trace.errors and trace.cases:
            return trace.cases
    with tempfile.TemporaryDirectory(prefix="atenforge-opinfo-") as tmp:
        out = Path(tmp) / "opinfo_trace.txt"
        _run_child(out)
        text = out.read_text(encoding="utf-8")
        if use_cache:
            try:
                os.replace(out, path)
            except OSError as exc:
                log.debug("opinfo cache not kept: %s", exc)
    return parse_trace_text(text, origin="opinfo").cases


def _run_child(out: Path) -> None:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    log.info("collecting the opinfo suite (about a minute; cached afterwards)")
    proc = subprocess.run(
        [sys.executable, "-m", "evaluator.cases.opinfo_suite", str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not out.is_file():
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit code {proc.returncode}"
        if proc.returncode == _EXIT_MISSING_MODULE:
            raise UsageError(last)
        raise UsageError(f"the opinfo suite could not be collected ({last}); pick another suite.")


def _cache_path() -> Path:
    digest = hashlib.sha256(torch.__version__.encode())
    for module in (__file__, inputs_module.__file__, testcase_module.__file__):
        digest.update(Path(module).read_bytes())
    return Path(tempfile.gettempdir()) / f"atenforge-opinfo-{digest.hexdigest()[:16]}.txt"


def collect(opinfos: Iterable[Any]) -> dict[str, list[TestCase]]:
    """Cases per ATen overload from the given OpInfo entries, sorted by overload name."""
    found: dict[str, dict[str, None]] = {}
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        for opinfo in opinfos:
            dtype = _pick_dtype(opinfo)
            if dtype is None:
                continue
            torch.manual_seed(0)
            try:
                # islice: some generators yield >1000 near-identical samples; draw only what we use.
                samples = list(
                    itertools.islice(
                        opinfo.sample_inputs("cpu", dtype, requires_grad=False),
                        MAX_SAMPLES_PER_OPINFO,
                    )
                )
            except Exception:  # noqa: BLE001 - sample generators that need CUDA, scipy ...
                continue
            for sample in samples:
                hit = _record_one(opinfo, sample)
                if hit is not None:
                    found.setdefault(hit[0], {})[hit[1]] = None
        result: dict[str, list[TestCase]] = {}
        for op in sorted(found):
            texts = list(found[op])[:MAX_CASES_PER_OP]
            cases = [c for c in (_usable(op, text) for text in texts) if c is not None]
            if cases:
                result[op] = cases
    log.info("opinfo suite: %d overloads, %d cases", len(result), sum(map(len, result.values())))
    return result


def _main(argv: list[str]) -> int:
    """`python -m evaluator.opinfo_suite OUT`: collect all of op_db and write a trace to OUT."""
    if len(argv) != 1:
        print("usage: python -m evaluator.opinfo_suite OUT_TRACE_FILE", file=sys.stderr)
        return 2
    try:
        cases = collect(_load_op_db())
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return _EXIT_MISSING_MODULE
    Path(argv[0]).write_text(format_trace(cases), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
