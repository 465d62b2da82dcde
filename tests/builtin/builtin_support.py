"""Test support for builtin-provider kernels: run a generated kernel file and judge it as the
evaluator does.

`run_generated(op, source, cases, seed=0)` writes `source` as the op's kernel file in a temporary
folder, imports it, calls `<folder>_kernel_impl` on each TestCase's inputs and compares every
output (and, for in-place/out= overloads, the written tensor) with
`torch.ops.aten.<name>.<overload>` on an identical copy of the inputs; inputs eager leaves alone
must stay bitwise untouched. It returns one line per mismatch (empty when all good).

Inputs and comparison are the evaluator's own, so these tests judge like the evaluator does:
`evaluator.cases.inputs.materialize` (seeded values, per-op rules for indices, positive and nonzero
operands, strides) and `evaluator.judge.checks.compare` with the default (strict) per-dtype tolerances
of `CorrectnessConfig`. Ops with other needs (particular index patterns, special values) pass
`make_args`.

Kernels run in Triton's CPU interpreter: tests/conftest.py sets TRITON_INTERPRET=1 without a GPU,
and tests/builtin/conftest.py skips these tests in a process without it. Importing this module
changes no environment variable.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from kernel_loading import load_kernel  # noqa: F401  (re-exported for the family tests)

from evaluator.cases.inputs import materialize
from evaluator.cases.testcase import TestCase
from evaluator.config import CorrectnessConfig
from evaluator.judge import checks
from evaluator.naming import kernel_file_name, kernel_function_name, normalize_op

CORRECTNESS = CorrectnessConfig()  # the evaluator's default: strict per-dtype tolerances

MakeArgs = Callable[[str, TestCase, torch.Generator], tuple[tuple[Any, ...], dict[str, Any]]]


def materialize_case(
    op: str, case: TestCase, gen: torch.Generator
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The evaluator's inputs for a case on the CPU (`evaluator.cases.inputs.materialize`), with the
    seed drawn from `gen` (so a seeded generator gives the same inputs every time)."""
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen).item())
    return materialize(op, case, "cpu", seed)


def _clone(value: Any) -> Any:
    """Copy tensors keeping their strides (a pristine twin of the inputs)."""
    if isinstance(value, torch.Tensor):
        twin = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype)
        twin.copy_(value)
        return twin
    if isinstance(value, list):
        return [_clone(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def compare(name: str, got: Any, want: Any) -> list[str]:
    """Mismatch lines between a kernel's output and eager's (tensors, tuples of them, scalars),
    from the evaluator's comparison (`evaluator.judge.checks.compare`, strict tolerances)."""
    result = checks.compare(got, want, CORRECTNESS, name)
    return [] if result.ok else [result.message or f"{name}: differs ({result.flags})"]


def _untouched(name: str, value: Any, pristine: Any, after_eager: Any) -> list[str]:
    """As the evaluator checks inputs: where eager left a tensor bitwise alone the kernel must too;
    where eager wrote it without saying so, the kernel's must match within tolerance."""
    if isinstance(value, list | tuple):
        lines: list[str] = []
        for i, (v, p, r) in enumerate(zip(value, pristine, after_eager, strict=False)):
            lines += _untouched(f"{name}[{i}]", v, p, r)
        return lines
    if not isinstance(value, torch.Tensor):
        return []
    if checks.bitwise_equal(after_eager, pristine):
        return [] if checks.bitwise_equal(value, pristine) else [f"{name}: input mutated"]
    return compare(f"{name} (eager updates it in place)", value, after_eager)


def _upcast(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in (torch.float16, torch.bfloat16):
        return value.float()
    if isinstance(value, list | tuple):
        return type(value)(_upcast(v) for v in value)
    return value


def compare_with_fp32_eager(name: str, eager: Any, got: Any, args: Any, kwargs: Any) -> list[str]:
    """Mismatch lines between a kernel's outputs and eager run on fp32 copies of its half-precision
    inputs, each rounded back to the kernel output's dtype (for ops whose half-precision eager
    accumulates in half precision while the kernel accumulates in fp32)."""
    want = eager(*_upcast(args), **kwargs)
    want = tuple(
        None if w is None else w.to(g.dtype if g is not None else w.dtype)
        for w, g in zip(want, got, strict=True)
    )
    return compare(name, got, want)


def run_generated(
    op: str,
    source: str,
    cases: list[TestCase],
    seed: int = 0,
    *,
    make_args: MakeArgs | None = None,
    reference: Callable[..., Any] | None = None,
) -> list[str]:
    """Run a generated kernel file on every case and compare with eager (or with `reference`,
    called like the op); [] when all match."""
    op = normalize_op(op)
    name, overload = op.split(".", 1)
    eager = getattr(getattr(torch.ops.aten, name), overload)
    expected = reference or eager
    mutating = [
        i for i, a in enumerate(eager._schema.arguments) if a.alias_info and a.alias_info.is_write
    ]
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="builtin_kernel_") as tmp:
        try:
            kernel = load_kernel(op, source, Path(tmp))
        except Exception as exc:  # a broken file is a finding, not a test crash
            return [f"import failed: {type(exc).__name__}: {exc}"]
        for index, case in enumerate(cases):
            label = f"case {index} {case.serialize()}"
            if make_args is None:
                args, kwargs = materialize(op, case, "cpu", seed * 1000 + index)
            else:
                args, kwargs = make_args(
                    op, case, torch.Generator().manual_seed(seed * 1000 + index)
                )
            ref_args, ref_kwargs = _clone(args), _clone(kwargs)
            pristine_args, pristine_kwargs = _clone(args), _clone(kwargs)
            try:
                want = expected(*ref_args, **ref_kwargs)
            except Exception as exc:
                problems.append(f"{label}: eager raised {type(exc).__name__}: {exc}")
                continue
            try:
                got = kernel(*args, **kwargs)
            except Exception as exc:
                problems.append(f"{label}: kernel raised {type(exc).__name__}: {exc}")
                continue
            problems += [f"{label}: {p}" for p in compare("output", got, want)]
            for i in mutating:
                arg_name = eager._schema.arguments[i].name
                mine = args[i] if i < len(args) else kwargs.get(arg_name)
                theirs = ref_args[i] if i < len(ref_args) else ref_kwargs.get(arg_name)
                problems += [f"{label}: {p}" for p in compare(f"mutated {arg_name}", mine, theirs)]
                if isinstance(got, torch.Tensor) and got is not mine:
                    problems.append(f"{label}: did not return the mutated {arg_name}")
            written = {eager._schema.arguments[i].name for i in mutating}
            for i, value in enumerate(args):
                if i not in mutating:
                    lines = _untouched(f"arg{i}", value, pristine_args[i], ref_args[i])
                    problems += [f"{label}: {p}" for p in lines]
            for key, value in kwargs.items():
                if key not in written:
                    lines = _untouched(key, value, pristine_kwargs[key], ref_kwargs[key])
                    problems += [f"{label}: {p}" for p in lines]
    return problems


# ---------------------------------------------------------------- compiling for a GPU, without one

_COMPILE_CHILD = r"""
import importlib.util, json, sys, traceback
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path[:0] = json.loads(sys.argv[2])
import os
from builtin_support import materialize_case
from evaluator.cases.testcase import parse_case

jobs = json.loads(open(sys.argv[1]).read())
TYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32",
         torch.float64: "fp64", torch.int8: "i8", torch.uint8: "u8", torch.int16: "i16",
         torch.int32: "i32", torch.int64: "i64", torch.bool: "i1"}
launches = []

def capture(self, *args, grid, warmup, **kwargs):
    launches.append((self, args, kwargs))  # record the launch instead of running it

triton.runtime.jit.JITFunction.run = capture

def arg_type(v):
    if isinstance(v, torch.Tensor):
        return "*" + TYPES[v.dtype]
    if isinstance(v, bool):
        return "i1"
    if isinstance(v, int):
        return "i32" if -2**31 <= v < 2**31 else "i64"
    if isinstance(v, float):
        return "fp32"
    raise TypeError(type(v))

try:  # Triton's own launch-time specialization (3.4+): ints equal to 1 become constexprs, and
    # ints divisible by 16 and 16-byte aligned tensors get a divisibility hint, which decides
    # vector widths, async copies and so shared memory use; compile what a GPU launch compiles
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    def specialization(p, v):
        if p.is_constexpr or v is None or isinstance(v, (bool, float, str)):
            return "", None
        try:
            return native_specialize_impl(
                BaseBackend, v, False, not getattr(p, "do_not_specialize", False),
                not getattr(p, "do_not_specialize_on_alignment", False))[:2]
        except Exception:  # a type Triton does not specialize: plain
            return "", None
except ImportError:
    def specialization(p, v):
        return "", None

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")

def cuobjdump(cubin, flag):
    import subprocess, tempfile
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([CUOBJDUMP, flag, f.name], capture_output=True, text=True,
                              check=True).stdout

def resources(cubin, sass):
    # (SASS instructions, registers per thread, local-memory stores: register spills)
    import re
    regs = re.findall(r"REG:(\d+)", cuobjdump(cubin, "-res-usage"))
    return (len(re.findall(r"/\*[0-9a-f]{4}\*/", sass)), int(regs[0]) if regs else -1,
            len(re.findall(r"\bSTL\b", sass)))

def load_order(sass):
    # (loads consumed early, loads) of the straight-line SASS block with the most early ones:
    # a global load whose result an instruction reads before the block's last global load is
    # issued; that instruction stalls until the load returns, so the later loads wait a memory
    # latency too (ptxas keeps instruction order within a block)
    import re
    blocks, block = [], []
    for line in sass.splitlines():
        if re.match(r"\s*\.L_x_\d+:", line):
            blocks.append(block)
            block = []
            continue
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);", line)
        if m:
            block.append((m.group(1), m.group(2)))
            if m.group(1).startswith(("BRA", "EXIT", "RET")):
                blocks.append(block)
                block = []
    blocks.append(block)
    worst = (0, 0)
    for block in blocks:
        loads = [i for i, (op, _) in enumerate(block) if op.startswith("LDG")]
        early = 0
        for i in loads[:-1]:
            op, operands = block[i]
            dest = re.match(r"R(\d+)", operands.strip())
            if not dest:
                continue
            width = 4 if ".128" in op else 2 if ".64" in op else 1
            regs = {f"R{int(dest.group(1)) + w}" for w in range(width)}
            for op2, operands2 in block[i + 1:loads[-1]]:
                sources = operands2 if op2.startswith(("ST", "LDG")) else operands2.partition(",")[2]
                if regs & set(re.findall(r"\bR\d+\b", sources.replace(".64", ""))):
                    early += 1
                    break
        worst = max(worst, (early, len(loads)))
    return worst

results = {}
orders = {}
for number, job in enumerate(jobs):
    problems = results.setdefault(job["op"], [])
    name = f"_gpu_compile_kernel_{number}"
    spec = importlib.util.spec_from_file_location(name, job["path"])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    impl = getattr(module, job["function"])
    for index, text in enumerate(job["cases"]):
        case = parse_case(text)
        args, kwargs = materialize_case(job["op"], case, torch.Generator().manual_seed(index))
        del launches[:]
        try:
            impl(*args, **kwargs)
        except Exception as exc:
            problems.append(f"case {index}: wrapper raised {type(exc).__name__}: {exc}")
            continue
        if not launches:
            problems.append(f"case {index}: no kernel launch was captured")
        for fn, largs, lkwargs in launches:
            options = {k: lkwargs.pop(k) for k in ("num_warps", "num_stages", "maxnreg")
                       if k in lkwargs}
            values = dict(zip(fn.arg_names, largs))
            values.update(lkwargs)
            signature, constexprs, attrs = {}, {}, {}
            for i, p in enumerate(fn.params):
                v = values[p.name]
                if (isinstance(v, float) and not p.is_constexpr
                        and getattr(p, "annotation_type", "") != "fp64"):
                    problems.append(f"case {index}: {fn.__name__} gets the float {v!r} through "
                                    f"{p.name!r}, which is not annotated tl.float64 (packed as fp32)")
                kind, hint = specialization(p, v)
                if p.is_constexpr or kind == "constexpr":
                    signature[p.name] = "constexpr"
                    constexprs[p.name] = v
                else:  # an annotated parameter (tl.float64 scalars) is packed as annotated
                    signature[p.name] = getattr(p, "annotation_type", "") or arg_type(v)
                    if hint == "D":
                        attrs[(i,)] = [["tt.divisibility", 16]]
            try:
                compiled = triton.compile(
                    ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                    target=GPUTarget("cuda", job["arch"], 32), options=options)
            except Exception as exc:
                last = traceback.format_exception_only(type(exc), exc)[-1].strip()
                problems.append(f"case {index}: {fn.__name__} does not compile: {last[:800]}")
                continue
            if job.get("load_order"):
                cubin = compiled.asm["cubin"]
                sass = cuobjdump(cubin, "-sass")
                if os.environ.get("ATENFORGE_SASS_DIR"):  # load_order_audit.py --sass-dir
                    with open(os.path.join(os.environ["ATENFORGE_SASS_DIR"],
                                           f"{job['op']}.{index}.{fn.__name__}.sass"), "w") as f:
                        f.write(sass)
                orders.setdefault(job["op"], []).append(
                    [index, fn.__name__, *load_order(sass), *resources(cubin, sass),
                     compiled.metadata.shared])
print(json.dumps({"problems": results, "load_order": orders}))
"""


def compile_for_gpu(op: str, source: str, cases: list[TestCase], *, arch: int = 90) -> list[str]:
    """Compile every kernel launch the cases make to cubin for an sm_`arch` GPU, without a GPU.

    Runs the wrapper on CPU tensors in a child process where Triton is not in interpreter mode,
    captures each launch instead of running it, and compiles it with the launch's argument types
    and constexprs, specialized as Triton's launcher specializes them (ints equal to 1 become
    constexprs; ints divisible by 16 and 16-byte aligned tensors carry that hint, which turns on
    vector accesses and async-copy pipelining, and with them shared memory use). Catches code the
    interpreter accepts but the compiler rejects, and a Python float passed to a parameter not
    annotated `tl.float64` (the launcher would round it to fp32; the interpreter keeps it a
    double, so no CPU result shows it). Returns problem
    lines (empty when all compile); raises RuntimeError when the child itself fails.
    """
    return compile_many([(op, source, cases)], arch=arch)[normalize_op(op)]


def assert_compiles_for_sm90(jobs: list[tuple[str, str, list[TestCase]]]) -> None:
    """Every (op, source, cases) compiles for sm_90 with no problem; skips the calling test when
    Triton's CUDA backend cannot compile here (no ptxas)."""
    import pytest

    try:
        problems = compile_many(jobs)
    except RuntimeError as exc:
        if "No module named" in str(exc) or "ptxas" in str(exc):
            pytest.skip(f"Triton's CUDA backend is not usable here: {exc}")
        raise
    assert set(problems) == {normalize_op(op) for op, _, _ in jobs}
    bad = {op: lines for op, lines in problems.items() if lines}
    assert not bad, bad


def compile_many(
    jobs: list[tuple[str, str, list[TestCase]]], *, arch: int = 90
) -> dict[str, list[str]]:
    """`compile_for_gpu` for several (op, source, cases) in one child process (saves ~3 s each)."""
    return _compile_child(jobs, arch=arch, load_order=False)["problems"]


def sm90_load_order(jobs: list[tuple[str, str, list[TestCase]]]) -> dict[str, list[list]]:
    """Per op, [case index, kernel name, loads consumed early, loads, SASS instructions,
    registers per thread, spill stores, shared memory bytes] for every launch its cases make,
    compiled for sm_90 (SASS read with the cuobjdump that ships with Triton): the block
    of straight-line SASS with the most global loads whose result is read before the block's
    last global load is issued. Each such read stalls the warp for a memory latency before the
    remaining loads go out (a one-tile softmax row ran 1.75x slower on the H200 for it:
    docs/history/BENCHMARKS-2026-11-to-12.md §22). Skips the calling test where the CUDA backend or
    cuobjdump is missing; raises on
    compile problems."""
    import pytest

    try:
        out = load_order_many(jobs)
    except RuntimeError as exc:
        if any(s in str(exc) for s in ("No module named", "ptxas", "cuobjdump", "FileNotFound")):
            pytest.skip(f"Triton's CUDA tools are not usable here: {exc}")
        raise
    bad = {op: lines for op, lines in out["problems"].items() if lines}
    assert not bad, bad
    return out["load_order"]


def load_order_many(jobs: list[tuple[str, str, list[TestCase]]]) -> dict[str, dict]:
    """{"problems": per op, compile problem lines; "load_order": per op, [case index, kernel,
    loads read early, loads, SASS instructions, registers, spill stores, shared memory bytes]
    per launch} for sm_90 (see `sm90_load_order`; raises RuntimeError
    when the compile child fails, e.g. no ptxas or cuobjdump)."""
    return _compile_child(jobs, arch=90, load_order=True)


def _compile_child(
    jobs: list[tuple[str, str, list[TestCase]]], *, arch: int, load_order: bool
) -> dict[str, dict]:
    import json
    import subprocess

    with tempfile.TemporaryDirectory(prefix="builtin_compile_") as tmp:
        specs = []
        for number, (op, source, cases) in enumerate(jobs):
            path = Path(tmp) / f"{number}_{kernel_file_name(op)}"
            path.write_text(source, encoding="utf-8")
            specs.append(
                {
                    "op": normalize_op(op),
                    "path": str(path),
                    "function": kernel_function_name(op),
                    "cases": [c.serialize() for c in cases],
                    "arch": arch,
                    "load_order": load_order,
                }
            )
        job_file = Path(tmp) / "jobs.json"
        job_file.write_text(json.dumps(specs))
        here = Path(__file__).resolve().parent
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["TRITON_DEFAULT_FP_FUSION"] = "1"
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _COMPILE_CHILD,
                str(job_file),
                json.dumps([str(here), str(here.parent), str(here.parent.parent)]),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"compile child failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
