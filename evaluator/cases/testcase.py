"""BackendBench's serialized test-case format: parse with `ast`, never `eval`.

A case is `((arg0, arg1, ...), {'kw': value})`; a tensor is `T([shape], dtype)` or
`T([shape], dtype, [stride])` with dtype codes `f16 bf16 f32 f64 c32 c64 c128 i8 i16 i32 i64 u8 b8`.
Other values are Python literals, `inf`/`nan`, `torch.<dtype|layout|memory_format>`, devices and
complex scalars (written `complex(re, im)`; `(1+2j)` is also read). A device is written as a string
(`'cuda'`), which BackendBench's parser reads; `device(type='cuda')` is still read.
Parsing yields plain data (`TensorSpec` placeholders); `evaluator.cases.inputs` turns it into tensors.
`serialize_case(parse_case(s)) == s` holds for every line we write ourselves.

A trace file groups cases per operator:
    Operator: aten.add.Tensor
    cnt: 156, ((T([1, 512, 768], f16), T([1, 512, 768], f16)), {})
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import evaluator.safe_ast as safe_ast
from evaluator.naming import normalize_op

DTYPE_CODES: dict[str, torch.dtype] = {
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
    "c32": torch.complex32,
    "c64": torch.complex64,
    "c128": torch.complex128,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "u8": torch.uint8,
    "b8": torch.bool,
}
CODE_OF_DTYPE: dict[torch.dtype, str] = {v: k for k, v in DTYPE_CODES.items()}

# `torch.<name>` attributes a case may mention: dtypes, layouts, memory formats.
_TORCH_CONSTANTS: dict[str, Any] = {
    name: getattr(torch, name)
    for name in dir(torch)
    if isinstance(getattr(torch, name, None), torch.dtype | torch.layout | torch.memory_format)
}


class CaseSyntaxError(ValueError):
    """A serialized case that does not follow the format; the message says where and why."""


@dataclass(frozen=True)
class TensorSpec:
    """A tensor placeholder: shape, dtype and optional strides (None = contiguous)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    stride: tuple[int, ...] | None = None

    def numel(self) -> int:
        return math.prod(self.shape)

    def storage_numel(self) -> int:
        """Elements the backing buffer needs to hold every strided position."""
        if self.stride is None:
            return self.numel()
        if any(s == 0 for s in self.shape):
            return 0
        return 1 + sum((n - 1) * st for n, st in zip(self.shape, self.stride, strict=True))

    def nbytes(self) -> int:
        return self.numel() * torch.empty((), dtype=self.dtype).element_size()


@dataclass(frozen=True)
class Device:
    """A device literal in a case (`device(type='cuda')` or a string); rewritten at run time."""

    text: str


@dataclass
class TestCase:
    """One serialized call of an operator: positional args, keyword args, and trace count."""

    __test__ = False  # not a pytest test class, despite the name

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    count: int = 0
    source: str = field(default="", compare=False)
    hidden: bool = field(default=False, compare=False)  # never shown in a prompt

    def serialize(self) -> str:
        return serialize_case(self.args, self.kwargs)

    def tensor_specs(self) -> list[TensorSpec]:
        found: list[TensorSpec] = []
        _collect_specs((self.args, self.kwargs), found)
        return found

    def total_numel(self) -> int:
        return sum(s.numel() for s in self.tensor_specs())

    def total_bytes(self) -> int:
        return sum(s.nbytes() for s in self.tensor_specs())


def map_values(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """`value` with `leaf` applied to every item that is not a list, tuple or dict, walking into
    those containers (rebuilt as plain lists, tuples and dicts, keys kept)."""
    if isinstance(value, list):
        return [map_values(v, leaf) for v in value]
    if isinstance(value, tuple):
        return tuple(map_values(v, leaf) for v in value)
    if isinstance(value, dict):
        return {k: map_values(v, leaf) for k, v in value.items()}
    return leaf(value)


def _collect_specs(value: Any, out: list[TensorSpec]) -> None:
    if isinstance(value, TensorSpec):
        out.append(value)
    elif isinstance(value, list | tuple):
        for v in value:
            _collect_specs(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _collect_specs(v, out)


# ---------------------------------------------------------------- parsing


def parse_case(text: str) -> TestCase:
    """Parse `((args...), {kwargs})` into a TestCase; raise CaseSyntaxError on anything else."""
    try:
        tree = safe_ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise CaseSyntaxError(f"not a Python-literal expression ({exc.msg})") from None
    except (ValueError, MemoryError, RecursionError):
        # Null bytes, or nesting deep enough to exhaust the parser: hostile or corrupt input.
        raise CaseSyntaxError(
            "not a Python-literal expression (unparsable or nested too deeply)"
        ) from None
    node = tree.body
    if not (isinstance(node, ast.Tuple) and len(node.elts) == 2):
        raise CaseSyntaxError("expected a pair ((args...), {kwargs})")
    try:
        args = _literal(node.elts[0])
        kwargs = _literal(node.elts[1])
    except RecursionError:
        raise CaseSyntaxError("value nested too deeply") from None
    if not isinstance(args, tuple):
        raise CaseSyntaxError("the first element must be a tuple of positional arguments")
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise CaseSyntaxError("the second element must be a dict of keyword arguments")
    return TestCase(args=args, kwargs=kwargs, source=text.strip())


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int | float | bool | str | complex) or node.value is None:
            return node.value
        raise CaseSyntaxError(f"unsupported constant {node.value!r}")
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e) for e in node.elts)
    if isinstance(node, ast.List):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise CaseSyntaxError("dict unpacking (**) is not allowed")
        keys = [_literal(k) for k in node.keys]  # type: ignore[arg-type]
        if not all(isinstance(k, str | int | float | bool) for k in keys):
            raise CaseSyntaxError("dict keys must be strings or numbers")
        return dict(zip(keys, (_literal(v) for v in node.values), strict=True))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        # repr() of a complex scalar is `(1+2j)` / `(-0-1j)`: real part, sign, imaginary literal.
        left, right = _literal(node.left), _literal(node.right)
        if not (_is_real(left) and isinstance(right, complex) and right.real == 0):
            raise CaseSyntaxError(f"unsupported syntax {ast.unparse(node)!r}")
        return complex(left, right.imag if isinstance(node.op, ast.Add) else -right.imag)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _literal(node.operand)
        if not isinstance(value, int | float | complex) or isinstance(value, bool):
            raise CaseSyntaxError("unary minus on a non-number")
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Name):
        if node.id == "inf":
            return math.inf
        if node.id == "nan":
            return math.nan
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        raise CaseSyntaxError(f"unknown name {node.id!r}")
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id == "torch" and node.attr in _TORCH_CONSTANTS:
            return _TORCH_CONSTANTS[node.attr]
        raise CaseSyntaxError(f"unknown attribute {node.value.id}.{node.attr}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "T":
            return _tensor_spec(node)
        if node.func.id == "device":
            return _device(node)
        if node.func.id == "complex":
            return _complex(node)
    raise CaseSyntaxError(f"unsupported syntax {ast.unparse(node)!r}")


def _is_real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int_list(node: ast.AST, what: str) -> tuple[int, ...]:
    value = _literal(node)
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise CaseSyntaxError(f"T(...) {what} must be a list of ints")
    return tuple(value)


def _tensor_spec(node: ast.Call) -> TensorSpec:
    if node.keywords or not 2 <= len(node.args) <= 3:
        raise CaseSyntaxError("T(...) takes ([shape], dtype) or ([shape], dtype, [stride])")
    shape = _int_list(node.args[0], "shape")
    code = node.args[1]
    if not (isinstance(code, ast.Name) and code.id in DTYPE_CODES):
        raise CaseSyntaxError(f"unknown dtype code {ast.unparse(code)!r}")
    stride = _int_list(node.args[2], "stride") if len(node.args) == 3 else None
    if stride is not None and len(stride) != len(shape):
        raise CaseSyntaxError("T(...) stride and shape differ in length")
    if any(s < 0 for s in shape) or (stride is not None and any(s < 0 for s in stride)):
        raise CaseSyntaxError("T(...) shape and stride must be non-negative")
    return TensorSpec(shape=shape, dtype=DTYPE_CODES[code.id], stride=stride)


def _complex(node: ast.Call) -> complex:
    parts = [_literal(a) for a in node.args]
    if node.keywords or len(parts) != 2 or not all(_is_real(p) for p in parts):
        raise CaseSyntaxError("complex(...) takes two real numbers")
    return complex(parts[0], parts[1])


def _device(node: ast.Call) -> Device:
    if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return Device(node.args[0].value)
    for kw in node.keywords:
        if kw.arg == "type" and isinstance(kw.value, ast.Constant):
            return Device(str(kw.value.value))
    raise CaseSyntaxError("device(...) needs a type")


# ---------------------------------------------------------------- serializing


def serialize_value(value: Any) -> str:
    if isinstance(value, TensorSpec):
        code = CODE_OF_DTYPE[value.dtype]
        shape = _list_text(value.shape)
        if value.stride is None:
            return f"T({shape}, {code})"
        return f"T({shape}, {code}, {_list_text(value.stride)})"
    if isinstance(value, torch.Tensor):
        spec = spec_of_tensor(value)
        return serialize_value(spec)
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, complex):
        # `complex(re, im)` rather than repr(): repr gives forms like `infj` or `-1j` that do not
        # round-trip through the literal parser.
        return f"complex({serialize_value(value.real)}, {serialize_value(value.imag)})"
    if isinstance(value, int | str):
        return repr(value)
    if isinstance(value, torch.dtype | torch.layout | torch.memory_format):
        return str(value)
    if isinstance(value, Device):
        return repr(value.text)  # a string, as BackendBench's parser wants it
    if isinstance(value, torch.device):
        return repr(value.type)
    if isinstance(value, tuple):
        inner = ", ".join(serialize_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(serialize_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {serialize_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot serialize a {type(value).__name__}")


def _list_text(values: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def serialize_case(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return f"({serialize_value(tuple(args))}, {serialize_value(dict(kwargs))})"


def is_contiguous(spec: TensorSpec) -> bool:
    """Whether a tensor of this shape and strides is contiguous (as `Tensor.is_contiguous` says)."""
    if spec.stride is None:
        return True
    return torch.empty_strided(spec.shape, spec.stride, device="meta").is_contiguous()


def serialize_value_backendbench(value: Any) -> str:
    """One value as BackendBench's result records write it (`args` of its `full_results.json`):
    strides only for non-contiguous tensors, devices as strings, other scalars as `repr`."""
    if isinstance(value, TensorSpec):
        text = f"T({_list_text(value.shape)}, {CODE_OF_DTYPE[value.dtype]}"
        if not is_contiguous(value):
            text += f", {_list_text(value.stride or ())}"
        return text + ")"
    if isinstance(value, Device):
        return repr(value.text)
    if isinstance(value, torch.device):
        return repr(value.type)
    if isinstance(value, list):
        return "[" + ", ".join(serialize_value_backendbench(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(serialize_value_backendbench(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def serialize_case_backendbench(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """`((a, b,), {'k': v})`: the positional tuple always ends in `,)` (or is `()`), as in
    BackendBench's records; parseable by `parse_case` and by BackendBench."""
    parts = ", ".join(serialize_value_backendbench(a) for a in args)
    kw = ", ".join(f"'{k}': {serialize_value_backendbench(v)}" for k, v in kwargs.items())
    positional = f"({parts},)" if args else "()"
    return f"({positional}, {{{kw}}})"


def spec_of_tensor(t: torch.Tensor) -> TensorSpec:
    """Placeholder for a real tensor; strides kept only when the tensor is not contiguous."""
    stride = None if t.is_contiguous() else tuple(t.stride())
    return TensorSpec(shape=tuple(t.shape), dtype=t.dtype, stride=stride)


# ---------------------------------------------------------------- trace files


class TraceFileError(ValueError):
    """A malformed trace line: `path:line: reason`."""


@dataclass
class Trace:
    """Cases per operator (normalized overload name, e.g. `add.Tensor`), in file order."""

    cases: dict[str, list[TestCase]]
    errors: list[str] = field(default_factory=list)


def parse_trace_text(text: str, origin: str = "<trace>") -> Trace:
    """Parse a whole trace. Bad lines are collected as `origin:line: reason`; the rest still load."""
    cases: dict[str, list[TestCase]] = {}
    errors: list[str] = []
    current: str | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("Operator:"):
            name = line[len("Operator:") :].strip()
            if not name:
                errors.append(f"{origin}:{lineno}: 'Operator:' without a name")
                current = None
                continue
            current = normalize_op(name)
            cases.setdefault(current, [])
            continue
        if not line.startswith("cnt:"):
            errors.append(f"{origin}:{lineno}: expected 'Operator: ...' or 'cnt: N, (case)'")
            continue
        if current is None:
            errors.append(f"{origin}:{lineno}: case before any 'Operator:' line")
            continue
        count_text, sep, case_text = line[len("cnt:") :].partition(",")
        try:
            count = int(count_text.strip())
        except ValueError:
            errors.append(f"{origin}:{lineno}: count {count_text.strip()!r} is not an integer")
            continue
        if count < 0:
            errors.append(f"{origin}:{lineno}: count {count} is negative")
            continue
        if not sep:
            errors.append(f"{origin}:{lineno}: missing the case after the count")
            continue
        try:
            case = parse_case(case_text)
        except CaseSyntaxError as exc:
            errors.append(f"{origin}:{lineno}: {exc}")
            continue
        case.count = count
        cases[current].append(case)
    return Trace(cases=cases, errors=errors)


def load_trace(path: Path | str) -> Trace:
    """A `.txt` trace, or a BackendBench parquet test set (`.parquet`, needs pyarrow)."""
    path = Path(path)
    if path.suffix == ".parquet":
        from evaluator.cases.parquet_trace import load_parquet_trace

        return load_parquet_trace(path)
    return parse_trace_text(path.read_text(encoding="utf-8"), origin=str(path))


def format_trace(cases: dict[str, list[TestCase]]) -> str:
    """Inverse of `parse_trace_text` for well-formed data."""
    lines: list[str] = []
    for op, op_cases in cases.items():
        lines.append(f"Operator: aten.{normalize_op(op)}")
        for case in op_cases:
            lines.append(f"cnt: {case.count}, {case.serialize()}")
    return "\n".join(lines) + "\n"
