"""The one template behind the elementwise families (unary, binary, backward).

A family describes an operator with an `Elementwise` spec: which schema parameters are tensor
operands (broadcast together; a Python number in their place is accepted too), which are runtime
scalars, which decide the result dtype (as `torch.result_type`), and a few lines of Triton that
compute `out` from the loaded values. `render` turns a spec into a standalone kernel file:

- the wrapper's own Python signature binds the call (the schema's names and defaults). Host time
  is part of every measured call, so everything a call decides (result and compute dtypes,
  broadcast shape, output layout, dim merging, launch config, constexpr flags) is a launch plan
  cached per call geometry (`_PLANS`, keyed by each operand's shape, strides, dtype and device or a
  number's type; bounded). A repeated call builds that key, looks it up, allocates the output
  (`torch.empty_strided`) and launches. The output is laid out like the first dense input of the
  output's shape, or is `self` (in-place) / `out` (out=, resized as eager does); numbers, and 0-d
  tensors on another device (a CPU scalar beside CUDA tensors), are passed by value, 0-d tensors
  on the output's device are read in-kernel;
- when every tensor operand is laid out exactly like a dense output (the common case) it launches
  `_kernel_flat`: index = offset, few arguments, vectorisable loads. Otherwise `_kernel`: the launch
  plan drops size-1 dims, walks the output's memory order and merges dims that every operand steps
  through as one, so a broadcast or strided case costs at most one div/mod per remaining dim (up
  to 6 dims; more falls back to contiguous copies), and operands laid out like the output are
  still indexed linearly. The merged sizes and strides live in a small tensor on the operands'
  device that the plan owns (written once by `_store_geometry`, a one-program kernel: no host-to-
  device copy), so a launch passes one pointer instead of ~6 ints per operand (each launch
  argument costs host time in the launcher); NDIM and which operands are linear are one
  constexpr, LAYOUT. Such plans normally launch `_kernel_tile` instead: the two innermost merged
  dims form a [BLOCK_R, BLOCK_C] tile and outer coordinates are per-program scalars, so no element
  pays a division, rows with unit inner stride are read in 16-byte vectors and operands broadcast
  along the row (stride 0) are loaded and computed once per row (`_TILE*` constants: knobs);
- arithmetic runs in f32 for f16/bf16/f32 (f64 stays f64, integers stay integers), values are cast
  back on store; offsets are int64 only when an offset can pass 2**31.

Variants: 0 = strided plan above; 1 = inputs made contiguous first (`.expand().contiguous()`) and a
flat loop; 2 = as 1 with a small fixed block. The wrapper never computes results with PyTorch: it
allocates, reads shapes/strides and, in fallbacks only, makes layout copies.
"""

from __future__ import annotations

import keyword
import re

import torch

from agent.providers.builtin import codegen, kernelsource
from agent.providers.builtin.elementwise_kernels import (
    NUM_VARIANTS,
    Elementwise,
    kernel_source,
    store_geometry_source,
    tile_kernel_source,
)
from agent.providers.builtin.request import KernelRequest, Writer
from evaluator.naming import normalize_op

# ---------------------------------------------------------------- device helpers (Triton)

# name -> source of each device helper (kernels/elementwise_helpers.py)
HELPERS: dict[str, str] = kernelsource.definitions("elementwise_helpers")

_HELPER_CALL = re.compile(r"\b(_[a-z0-9_]+)\(")


def _helpers_for(body: str) -> list[str]:
    """Sources of the device helpers `body` calls, dependencies first, in a stable order."""
    needed: list[str] = []
    seen: set[str] = set()

    def visit(text: str) -> None:
        for name in _HELPER_CALL.findall(text):
            if name in HELPERS and name not in seen:
                seen.add(name)
                visit(HELPERS[name])
                needed.append(name)

    visit(body)
    return [HELPERS[name].strip("\n") for name in needed]


# ---------------------------------------------------------------- host runtime (Python)

# dtype promotion and limits (kernels/elementwise.py), then the launch plans (elementwise_plan.py)
_RUNTIME = (
    kernelsource.emitted("elementwise", "runtime").rstrip("\n")
    + "\n\n\n"
    + kernelsource.emitted("elementwise_plan", "plan").strip("\n")
    + "\n"
)


def runtime_source(variant: int) -> str:
    """The host-side helpers every elementwise file carries, with the variant's layout policy."""
    contiguous = variant >= 1
    return (
        "# variant policy: True makes contiguous copies of the inputs before the launch\n"
        f"_CONTIGUOUS_INPUTS = {contiguous}\n\n" + _RUNTIME
    )


_A_REF = re.compile(r'a\["(\w+)"\]')


def _params(schema) -> list[tuple[str, str | None]]:
    """(name, default source or None) for each schema parameter, in order. Keyword-only
    parameters are accepted positionally too (recorded calls are replayed; lenient costs nothing);
    a parameter without a default after one with a default gets `_REQUIRED`, checked on entry."""
    out: list[tuple[str, str | None]] = []
    for arg in schema.arguments:
        if keyword.iskeyword(arg.name):
            raise ValueError(f"schema parameter {arg.name!r} is a Python keyword")
        if arg.has_default_value():
            out.append((arg.name, codegen.py_literal(arg.default_value)))
        elif type(arg.type).__name__ == "OptionalType":
            out.append((arg.name, "None"))
        else:
            out.append((arg.name, None))
    seen_default = False
    for i, (name, default) in enumerate(out):
        if default is not None:
            seen_default = True
        elif seen_default:
            out[i] = (name, "_REQUIRED")
    return out


def _plain(expr: str) -> str:
    """A spec expression over `a["name"]` rewritten over the wrapper's parameter variables."""
    return _A_REF.sub(lambda m: m.group(1), expr)


def _dtype_plan_source(spec: Elementwise) -> str:
    """`_dtype_plan(a)`: (out_dtype, cdt, is_float, out_bool, operand zero values), computed once
    per plan (`_build` calls it once per call geometry)."""
    promote = ", ".join(f'a["{p}"]' for p in spec.promote)
    zeros = ", ".join(f"_scalar(0, {'tl.int32' if o.raw else 'cdt'})" for o in spec.operands)
    return (
        "def _dtype_plan(a):\n"
        '    """Result and compute dtypes for this call\'s dtypes (cached by the wrapper)."""\n'
        f"    dtype = _result_type({promote})\n"
        f"    out_dtype = {spec.result}\n"
        f"    cdt = _compute_dtype({spec.compute})\n"
        "    is_float = cdt is tl.float32 or cdt is tl.float64\n"
        f"    return out_dtype, cdt, is_float, out_dtype == torch.bool, ({zeros},)\n"
    )


def _tensor_key(name: str) -> str:
    """The plan-key part of one tensor parameter, inlined for an exact torch.Tensor."""
    return (
        f"({name}.shape, {name}.stride(), {name}.dtype, {name}.device)"
        f" if type({name}) is _T else _key_of({name})"
    )


def _wrapper_source(op: str, spec: Elementwise, kind: str) -> str:
    """kind: 'functional' (allocate), 'inplace' (write self) or 'out' (write the out= tensor).

    The wrapper binds arguments through its own Python signature, builds the call's plan key
    (operand geometries and dtypes, number types, the parameters the dtype depends on), and on a
    hit only allocates the output and launches: every decision (dtypes, broadcasting, layout, dim
    merging, launch config, constexpr flags) lives in the cached plan (`_build`)."""
    schema = codegen.schema_of(op)
    fn = codegen.function_name(op)
    params = _params(schema)
    names = [n for n, _ in params]
    signature = ", ".join(n if d is None else f"{n}={d}" for n, d in params)
    vars_ = [o.param for o in spec.operands]
    refs = sorted(set(_A_REF.findall(spec.result + spec.compute)) - set(spec.promote) - set(vars_))
    key_items = [_tensor_key(v) for v in vars_]
    if kind == "out":
        key_items.append(_tensor_key("out"))
    key_items += [f"_key_of({p})" for p in spec.promote if p not in vars_]  # e.g. clamp's min
    key_items += refs
    scalars = [f"*_scalar({p}, cdt)" for p, _ in spec.scalars]
    consts = [_plain(expr) for _, expr in spec.constexprs]
    raw = ", ".join(str(o.raw) for o in spec.operands)
    out_arg = {"functional": "None", "inplace": "self", "out": "out"}[kind]
    lines = [f'_KIND = "{kind}"', f"_RAW = ({raw},)", "", "", f"def _op({signature}):"]
    for n, d in params:
        if d == "_REQUIRED":
            lines += [
                f"    if {n} is _REQUIRED:",
                f'        raise TypeError(f"{{_OP}} missing required argument {n!r}")',
            ]
    lines.append("    key = (")
    lines += [f"        {item}," for item in key_items]
    lines += [
        "    )",
        "    plan = _PLANS.get(key)",
        "    if plan is None:",
        f"        plan = _build(key, ({', '.join(vars_)},), "
        + "{"
        + ", ".join(f'"{n}": {n}' for n in names)
        + "}"
        + f", {out_arg})",
    ]
    per_operand = [f"m{i}, z{i}" for i in range(len(vars_))]
    lines.append(
        "    launch, cdt, shape, strides, dtype, device, grid, block, warps, mid, "
        + ", ".join(per_operand)
        + " = plan"
    )
    if kind == "functional":
        lines.append("    out = _empty_strided(shape, strides, dtype=dtype, device=device)")
    elif kind == "inplace":
        lines.append("    out = self")
    for i, v in enumerate(vars_):
        lines += [
            f"    if m{i} is None:  # read by the kernel",
            f"        p{i}, v{i} = {v}, z{i}",
            "    else:  # passed by value",
            f"        p{i}, v{i} = out, m{i}({v})",
        ]
    ptrs = [f"p{i}" for i in range(len(vars_))]
    vals = [f"*v{i}" for i in range(len(vars_))]
    args = ", ".join(["out", *ptrs, *vals, *scalars, "*mid", *consts])
    lines += [
        "    if launch == 1:",
        f"        _kernel_flat[grid]({args}, BLOCK=block, num_warps=warps)",
        "    elif launch == 2:",
        f"        _kernel[grid]({args}, BLOCK=block, num_warps=warps)",
        "    elif launch == 4:",
        f"        _kernel_tile[grid]({args}, BLOCK_R=block[0], BLOCK_C=block[1], num_warps=warps)",
        "    elif launch == 3:",
        f"        _launch_copies(out, ({', '.join(ptrs)},), ({''.join(v + ', ' for v in vals)}), "
        f"({''.join(s + ', ' for s in scalars)}), ({''.join(c + ', ' for c in consts)}), plan)",
        "    return out",
        "",
        "",
        f"def {fn}(*args, **kwargs):",
        f'    """aten::{normalize_op(op)} with its exact schema; `_op`\'s signature binds the arguments."""',
        "    return _op(*args, **kwargs)",
    ]
    return "\n".join(lines) + "\n"


def kind_of(op: str) -> str:
    """'inplace' for `add_.Tensor`-style overloads, 'out' for out= ones, else 'functional'."""
    schema = codegen.schema_of(op)
    for arg in schema.arguments:
        if arg.name == "out" and arg.alias_info is not None and arg.alias_info.is_write:
            return "out"
    first = schema.arguments[0] if schema.arguments else None
    if first is not None and first.alias_info is not None and first.alias_info.is_write:
        return "inplace"
    return "functional"


def render(op: str, spec: Elementwise, variant: int) -> str:
    """The whole kernel file for `op` from `spec`."""
    variant = min(max(variant, 0), NUM_VARIANTS - 1)
    schema = codegen.schema_of(op)
    kind = kind_of(op)
    plans = {
        0: "Plan: one launch over the output. Operands laid out like the output use "
        "`_kernel_flat` (index = offset); otherwise `_kernel` reads each operand through its "
        "strides (broadcast = stride 0) after dims are merged in the output's memory order.",
        1: "Plan (fallback): inputs are made contiguous in the output's shape first, then one "
        "flat launch.",
        2: "Plan (fallback): inputs are made contiguous first, then one flat launch with small "
        "fixed blocks.",
    }
    header = codegen.file_header(
        op,
        summary=spec.summary,
        plan=plans[variant]
        + " Arithmetic runs in float32 for float16/bfloat16/float32 (float64 and integers in "
        "their own type); results are cast back on store.",
        variant=variant,
        schema=schema,
    )
    return codegen.render_file(
        header,
        codegen.DTYPE_SOURCE,
        runtime_source(variant),
        _dtype_plan_source(spec),
        codegen.launch_config_source(variant),
        spec.helpers_src,
        *_helpers_for(spec.body),
        kernel_source(spec, flat=True),
        kernel_source(spec, flat=False),
        tile_kernel_source(spec),
        store_geometry_source(spec),
        _wrapper_source(op, spec, kind),
    )


# ---------------------------------------------------------------- writers


def _computes_in_integers(case) -> bool:
    """True when no operand of the case is floating (tensor dtype or Python float)."""
    specs = case.tensor_specs()
    if any(s.dtype in codegen.FLOAT_DTYPES for s in specs):
        return False

    def has_float(value) -> bool:
        if isinstance(value, float):
            return True
        if isinstance(value, list | tuple):
            return any(has_float(v) for v in value)
        if isinstance(value, dict):
            return any(has_float(v) for v in value.values())
        return False

    return not has_float((case.args, case.kwargs))


def writer_for(spec: Elementwise) -> Writer:
    """A Writer that renders `spec`, or declines (None) cases the template cannot handle."""

    def write(request: KernelRequest) -> str | None:
        if codegen.unsupported_dtypes(request.cases):
            return None
        if spec.float_only and any(_computes_in_integers(c) for c in request.cases):
            return None
        return render(request.op, spec, request.variant)

    return write


def _signature(schema) -> list[tuple[str, str]]:
    return [(a.name, str(a.type)) for a in schema.arguments if a.name != "out"]


def derived_overloads(op: str) -> list[str]:
    """In-place (`add_.Tensor`) and out= (`add.out`) overloads with the same parameters as `op`."""
    name, _ = op.split(".", 1)
    base = _signature(codegen.schema_of(op))
    found: list[str] = []
    for packet_name in (name + "_", name):
        packet = getattr(torch.ops.aten, packet_name, None)
        if packet is None:
            continue
        for overload in sorted(packet.overloads()):
            candidate = f"{packet_name}.{overload}"
            if candidate == op:
                continue
            schema = codegen.schema_of(candidate)
            if _signature(schema) != base:
                continue
            if packet_name == name and kind_of(candidate) != "out":
                continue
            if packet_name != name and kind_of(candidate) != "inplace":
                continue
            found.append(candidate)
    return found


def writers_for(specs: dict[str, Elementwise], *, derive: bool = True) -> dict[str, Writer]:
    """WRITERS for a family: every spec'd overload plus its in-place and out= forms."""
    writers: dict[str, Writer] = {}
    for op, spec in specs.items():
        writers[op] = writer_for(spec)
        if derive:
            for extra in derived_overloads(op):
                writers.setdefault(extra, writer_for(spec))
    return writers
