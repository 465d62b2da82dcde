"""Shared pieces of the kernel files that builtin writers emit (all families reuse them).

Every emitted file is standalone (the sandbox loads it alone): it imports only torch, triton and
triton.language, defines `<folder>_kernel_impl(*args, **kwargs)` for the overload's exact schema,
and launches `@triton.jit` kernels. The helpers here produce the parts every file shares:

- `file_header`: module docstring (op, schema, plan, variant) and imports;
- `binder_source`: `_bind(args, kwargs) -> dict` naming the call's arguments after the schema;
- `DTYPE_SOURCE`: `_TL_DTYPE` (torch -> triton dtypes) and `_compute_dtype` (f16/bf16 widen to
  f32: needed for accuracy and because Triton's CPU interpreter computes bf16 wrongly otherwise);
- `PDL_SOURCE`: `_pdl_ok(device)`, `_pdl_launch(pdl)` and `_pdl_enter(WAIT, TRIGGER)`, programmatic dependent
  launches for files that launch several kernels per call;
- `launch_config_source`: `_launch_config(n, device) -> (BLOCK, num_warps)`, the one place where
  block sizes are chosen;
- `FAST_LAUNCH_SOURCE` / `fast_launch_section`: after a kernel's first launch with a given
  specialization, later launches call Triton's compiled launcher directly (Triton's own per-call
  bookkeeping costs more host time than most torchbench cases take on the GPU);
- `render_file`: joins sections, wraps every plain `@triton.jit` kernel the file launches with
  `kernel[grid](...)` in the fast launcher, and checks the result is valid Python.

Helpers return source text; nothing here runs a kernel.
"""

from __future__ import annotations

import ast
import math
import textwrap
from typing import Any

import torch

from agent.providers.builtin import kernelsource
from evaluator import safe_ast
from evaluator.naming import kernel_function_name, normalize_op

# Real dtypes the builtin kernels handle (complex, fp8 and wide unsigned types are declined).
SUPPORTED_DTYPES: frozenset[torch.dtype] = frozenset(
    {
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.int8,
        torch.uint8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.bool,
    }
)
FLOATS: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
FLOAT_DTYPES: frozenset[torch.dtype] = frozenset(FLOATS)


def schema_of(op: str) -> Any:
    """torch's FunctionSchema for an overload (`add.Tensor`); KeyError when torch has none."""
    name, overload = normalize_op(op).split(".", 1)
    packet = getattr(torch.ops.aten, name, None)
    if packet is None or overload not in packet.overloads():
        raise KeyError(f"torch has no aten::{name}.{overload}")
    return getattr(packet, overload)._schema


def function_name(op: str) -> str:
    """The entry point a kernel file must define, e.g. `add__Tensor_kernel_impl`."""
    return kernel_function_name(op)


def py_literal(value: Any) -> str:
    """A schema default as Python source (`inf` and `nan` have no literal of their own)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, torch.dtype):
        return str(value)
    return repr(value)


def file_header(op: str, *, summary: str, plan: str, variant: int, schema: Any) -> str:
    """Module docstring and imports. `plan` says how the kernel works, in a sentence or two."""
    plan_text = textwrap.fill(plan, width=96)
    return (
        f'"""aten::{normalize_op(op)} as a Triton kernel: {summary}\n\n'
        f"Written by atenforge's builtin provider (builtin-v1, variant {variant}).\n"
        f"Schema: {schema}\n\n"
        f"{plan_text}\n"
        '"""\n\n'
        "import torch\n"
        "import triton\n"
        "import triton.language as tl\n\n"
        f'_OP = "aten::{normalize_op(op)}"\n'
    )


def binder_source(schema: Any) -> str:
    """`_bind(args, kwargs) -> dict[str, value]` for the schema, defaults filled in.

    Optional parameters without a default bind to None. Keyword-only parameters are also accepted
    positionally (callers replay recorded calls; being lenient there costs nothing).
    """
    names: list[str] = []
    defaults: dict[str, str] = {}
    for arg in schema.arguments:
        names.append(arg.name)
        if arg.has_default_value():
            defaults[arg.name] = py_literal(arg.default_value)
        elif type(arg.type).__name__ == "OptionalType":
            defaults[arg.name] = "None"
    params = repr(tuple(names))
    default_items = ", ".join(f"{k!r}: {v}" for k, v in defaults.items())
    return (
        f"_PARAMS = {params}\n"
        f"_DEFAULTS = {{{default_items}}}\n\n\n"
        "def _bind(args, kwargs):\n"
        '    """Name the call\'s arguments after the schema\'s parameters, filling in defaults."""\n'
        "    if len(args) > len(_PARAMS):\n"
        '        raise TypeError(f"{_OP} takes at most {len(_PARAMS)} arguments ({len(args)} given)")\n'
        "    bound = dict(zip(_PARAMS, args))\n"
        "    for name, value in kwargs.items():\n"
        "        if name not in _PARAMS:\n"
        '            raise TypeError(f"{_OP} got an unexpected keyword argument {name!r}")\n'
        "        if name in bound:\n"
        '            raise TypeError(f"{_OP} got multiple values for argument {name!r}")\n'
        "        bound[name] = value\n"
        "    for name in _PARAMS:\n"
        "        if name not in bound:\n"
        "            if name not in _DEFAULTS:\n"
        '                raise TypeError(f"{_OP} missing required argument {name!r}")\n'
        "            bound[name] = _DEFAULTS[name]\n"
        "    return bound\n"
    )


DTYPE_SOURCE = kernelsource.runtime("dtypes") + "\n"

# `_pdl_ok`, `_pdl_launch`, `_pdl_enter`: programmatic dependent launches (the file defines `_INTERPRET`).
PDL_SOURCE = kernelsource.runtime("_pdl_ok", "_pdl_launch", "_pdl_enter") + "\n"

# Gluon for kernels that hold data in shared memory (`gluon` is None where it cannot be used).
GLUON_SOURCE = kernelsource.runtime("gluon") + "\n"


# Block-size policy per variant: (fixed BLOCK or None, num_warps for a fixed BLOCK).
_FIXED_BLOCKS: dict[int, tuple[int, int] | None] = {0: None, 1: None, 2: (256, 4)}


def launch_config_source(variant: int) -> str:
    """`_launch_config(n, device) -> (BLOCK, num_warps)` for a 1-D elementwise-style launch.

    On a GPU (H200): 1024 elements / 4 warps per program up to 4M elements, 2048 / 8 warps above
    (8 elements per thread either way: two 16-byte loads per operand for f32). On the CPU the
    kernel runs in Triton's interpreter, which executes programs one after another, so fewer,
    larger programs are much faster there. Variant 2 pins a small block as a last resort.
    """
    fixed = _FIXED_BLOCKS.get(variant, _FIXED_BLOCKS[max(_FIXED_BLOCKS)])
    if fixed is not None:
        return (
            "def _launch_config(n, device):\n"
            '    """(BLOCK, num_warps): a small fixed block (fallback variant)."""\n'
            f"    return {fixed[0]}, {fixed[1]}\n"
        )
    return (
        "def _launch_config(n, device):\n"
        '    """(BLOCK, num_warps) for n elements: sized for an H200; on the CPU (Triton\'s\n'
        '    interpreter runs programs one by one) fewer, larger programs are faster."""\n'
        '    if device.type == "cpu":\n'
        "        return min(max(triton.next_power_of_2(n), 128), 16384), 4\n"
        "    if n < (1 << 22):\n"
        "        return 1024, 4\n"
        "    return 2048, 8\n"
    )


def tiles_prelude(variant: int) -> str:
    """Tile and block-size helpers (kernels/tiles.py) that the tiled families share; variant >= 1
    takes small tiles."""
    return kernelsource.emitted("tiles", "prelude", values={"_CONSERVATIVE": str(variant >= 1)})


def indent(text: str, levels: int = 1) -> str:
    return textwrap.indent(text, "    " * levels, lambda line: bool(line.strip()))


def entry_point(op: str, body: str = "") -> str:
    """The file's section that binds the arguments: `body` (which defines `_op`), then the
    entry point with the op's name that BackendBench's DirectoryBackend loads."""
    name = function_name(op)
    entry = (
        f"def {name}(*args, **kwargs):\n"
        f'    """aten::{op} with its exact schema; the Python signature of `_op` binds the '
        f'arguments."""\n'
        f"    return _op(*args, **kwargs)\n"
    )
    return f"{body}\n\n\n{entry}" if body else entry


def render_file(*sections: str) -> str:
    """Join sections with two blank lines, route plain JIT kernels through the fast launcher;
    raise SyntaxError if the result is not valid Python."""
    text = "\n\n\n".join(s.strip("\n") for s in sections if s.strip()) + "\n"
    fast = fast_launch_section(text)
    if fast:
        text = text.rstrip("\n") + "\n\n\n" + fast
    compile(text, "<builtin kernel>", "exec")
    return text


def _decorator_names(node: ast.FunctionDef) -> set[str]:
    names = set()
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        names.add(ast.unparse(target))
    return names


def launched_jit_kernels(text: str) -> list[str]:
    """Top-level `@triton.jit` functions (not autotuned) that host code launches.

    Every such function is wrapped except those named inside any JIT function's body: a JIT
    function called from another kernel (or passed to `tl.reduce` as a combine function) must
    stay a JITFunction, since Triton resolves device-side references through module globals.
    Kernels host code keeps in variables or tables (`kernel = _a if x else _b`) are covered too.
    """
    tree = safe_ast.parse(text)
    jit_defs = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and (decs := _decorator_names(node)) & {"triton.jit"}
        and not decs & {"triton.autotune", "triton.heuristics"}
    ]
    all_jit = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and "triton.jit" in _decorator_names(node)
    }
    used_on_device = {
        inner.id
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name in all_jit
        for inner in ast.walk(node)
        if isinstance(inner, ast.Name)
    }
    return sorted(node.name for node in jit_defs if node.name not in used_on_device)


def fast_launch_section(text: str) -> str:
    """The fast launcher and the lines that wrap this file's launched kernels ("" if none)."""
    names = launched_jit_kernels(text)
    if not names:
        return ""
    wraps = "\n".join(f"{name} = _fast_launch({name})" for name in names)
    return FAST_LAUNCH_SOURCE + "\n\n" + wraps + "\n"


FAST_LAUNCH_SOURCE = kernelsource.runtime("fast_launch") + "\n"


def case_dtypes(cases: list[Any]) -> set[torch.dtype]:
    """Every tensor dtype the cases mention."""
    found: set[torch.dtype] = set()
    for case in cases:
        found.update(spec.dtype for spec in case.tensor_specs())
    return found


def unsupported_dtypes(cases: list[Any]) -> set[torch.dtype]:
    """Dtypes in the cases that builtin kernels do not handle (writers then return None)."""
    return case_dtypes(cases) - SUPPORTED_DTYPES


def pick(
    request: Any,
    specs: dict[str, Any],
    num_variants: int,
    allowed: Any = None,
    ignored: frozenset = frozenset(),
) -> tuple[Any, int] | None:
    """The family's spec for the request's operator and the variant clamped to the family's
    range; None when the family has no spec for it, or when a case has a dtype outside `allowed`
    (dtypes in `ignored` pass: index or offset tensors). `allowed` may be a function of the spec
    (families whose operators take different dtypes)."""
    spec = specs.get(request.op)
    if spec is None:
        return None
    if callable(allowed):
        allowed = allowed(spec)
    if allowed is not None and any(
        dt not in allowed for dt in case_dtypes(request.cases) - ignored
    ):
        return None
    return spec, min(max(request.variant, 0), num_variants - 1)


def render_family(
    request: Any,
    variant: int,
    *,
    summary: str,
    plan: str,
    sections: tuple[str, ...],
    body: str = "",
    after: tuple[str, ...] = (),
) -> str:
    """One emitted file: the header, the family's sections, the entry point, then `after`."""
    return render_file(
        file_header(request.op, summary=summary, plan=plan, variant=variant, schema=request.schema),
        *sections,
        entry_point(request.op, body),
        *after,
    )


def write_tiled(
    request: Any,
    specs: dict[str, tuple[Any, ...]],
    num_variants: int,
    plan: str,
    allowed: Any,
    *,
    common: tuple[str, ...] = (),
    ignored: frozenset = frozenset(),
) -> str | None:
    """One file of a tiled family whose specs are (summary, section, body, ...): the header, the
    tile helpers, `common`, the operator's section and its entry point; None where `pick`
    declines the request."""
    picked = pick(request, specs, num_variants, allowed, ignored)
    if picked is None:
        return None
    (summary, section, body, *_), variant = picked
    sections = (tiles_prelude(variant), *common, section)
    return render_family(request, variant, summary=summary, plan=plan, sections=sections, body=body)
