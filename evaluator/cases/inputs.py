"""Turn a parsed test case into real tensors: seeded, reproducible, and with values that exercise the op.

Contract:
    materialize(op, case, device, seed) -> (args, kwargs)

- Every `TensorSpec` becomes a tensor drawn from one `torch.Generator` seeded with `seed`, on the CPU,
  in argument order, then moved to `device`. Same (op, case, seed) -> same values on any machine;
  another seed -> other values of the same shapes, dtypes and strides.
- Default values: floats and complex `randn` (signed: uniform [0, 1) would make relu an identity);
  signed integers in [-16, 16), uint8 in [0, 32); bools fair coin flips.
- `profile="backendbench"` draws default values as BackendBench does (torch.testing.make_tensor
  with low=0, high=1 for floats): floats uniform in [0, 1); signed integers in [-9, 9], uint8 in
  [0, 9]; complex parts uniform in [-9, 9); bools coin flips. Per-op rules still apply (an index
  must be valid for eager to run at all).
- A spec with strides is an `as_strided` view over a buffer of `storage_numel()` elements, and the
  move to the device keeps those strides (the whole buffer travels, not a contiguous copy).
- Device literals (`device(type='cuda')`, a `torch.device`, or a string under a `device` keyword
  or where the schema takes a Device) are rewritten to the target device.
- Ops that need particular values (valid indices, positive inputs, nonzero divisors, sorted
  sequences, indices that a forward pass really produced ...) get them from `RULES`, the one registry
  of per-op overrides, keyed by overload (`pow.Tensor_Scalar`) or base name (`gather`, all its
  overloads). A rule names arguments as the op's schema does, so it works positionally and by keyword.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from evaluator.cases.testcase import Device, TensorSpec, TestCase
from evaluator.naming import base_name, normalize_op

INT_RANGE = (-16, 16)  # signed integers: small enough for int8, wide enough to have both signs
UINT8_RANGE = (0, 32)
# BackendBench's draws (torch.testing.make_tensor's defaults, floats given low=0, high=1)
BB_INT_RANGE = (-9, 10)
BB_UINT8_RANGE = (0, 10)
BB_COMPLEX_RANGE = (-9.0, 9.0)
DEFAULT = "default"
BB_DEFAULT = "backendbench"  # the default kind under the backendbench profile
COUNT_RANGE = (0, 4)  # repeat counts, shift amounts, bincount inputs

_HALF_FLOATS = (torch.float16, torch.bfloat16)


# ---------------------------------------------------------------- argument access by schema name


class Call:
    """An op's arguments, addressable by schema name whether passed positionally or by keyword."""

    def __init__(
        self, schema: torch.FunctionSchema | None, args: list[Any], kwargs: dict[str, Any]
    ):
        self.args = args
        self.kwargs = kwargs
        self._pos: dict[str, int] = {}
        self._default: dict[str, Any] = {}
        if schema is not None:
            for i, a in enumerate(schema.arguments):
                if not a.kwarg_only:
                    self._pos[a.name] = i
                if a.has_default_value():
                    self._default[a.name] = a.default_value

    def has(self, name: str) -> bool:
        return name in self.kwargs or self._pos.get(name, len(self.args)) < len(self.args)

    def get(self, name: str, default: Any = None) -> Any:
        if name in self.kwargs:
            return self.kwargs[name]
        pos = self._pos.get(name)
        if pos is not None and pos < len(self.args):
            return self.args[pos]
        return self._default.get(name, default)

    def set(self, name: str, value: Any) -> None:
        if name in self.kwargs:
            self.kwargs[name] = value
            return
        pos = self._pos.get(name)
        if pos is not None and pos < len(self.args):
            self.args[pos] = value

    def size(self, tensor: str, dim_arg: str | int) -> int:
        """Length of `tensor` along a dimension given literally or by another argument (e.g. `dim`)."""
        spec = self.get(tensor)
        dim = dim_arg if isinstance(dim_arg, int) else self.get(dim_arg, 0)
        shape = _shape(spec)
        if not shape:
            return 1
        return shape[dim % len(shape)]


def _shape(value: Any) -> tuple[int, ...]:
    if isinstance(value, TensorSpec):
        return value.shape
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    return ()


# ---------------------------------------------------------------- fills and rules


@dataclass(frozen=True)
class Fill:
    """How to draw one tensor argument (or every tensor in a list argument).

    kind: `positive` (0.1 .. 3), `nonzero` (|x| >= 0.25, integers != 0), `unit` (-0.95 .. 0.95),
    `prob` (0.05 .. 0.95), `ge1` (1 .. 4), `count` (small non-negative integers), `index` (integers
    in [0, bound(call))), `index_list` (each entry of `Tensor?[] indices` indexes the next dim of
    `self`; bool masks stay random). `when(call)` False -> the default fill.
    """

    kind: str
    bound: Callable[[Call], int] | None = None
    when: Callable[[Call], bool] | None = None


@dataclass(frozen=True)
class Rule:
    """Per-op overrides: fills by argument name, then `fix(call, gen)` on the CPU tensors."""

    fills: Mapping[str, Fill] = field(default_factory=dict)
    fix: Callable[[Call, torch.Generator], None] | None = None


POSITIVE, NONZERO, UNIT, PROB, GE1, COUNT = (
    Fill(k) for k in ("positive", "nonzero", "unit", "prob", "ge1", "count")
)


def index(bound: Callable[[Call], int]) -> Fill:
    return Fill("index", bound=bound)


def _along(tensor: str, dim_arg: str | int = "dim") -> Fill:
    return index(lambda c: c.size(tensor, dim_arg))


INDEX_LIST = Fill("index_list")


# ---------------------------------------------------------------- fixes that need the drawn tensors


def _put(call: Call, name: str, value: torch.Tensor) -> None:
    """Write `value` into argument `name`, keeping its layout when the shapes allow it."""
    old = call.get(name)
    if isinstance(old, torch.Tensor) and old.shape == value.shape:
        try:
            old.copy_(value.to(old.dtype))
            return
        except RuntimeError:  # overlapping (stride 0) memory cannot be written element-wise
            pass
    call.set(name, value.to(old.dtype) if isinstance(old, torch.Tensor) else value)


def _maxpool_indices(forward: str) -> Callable[[Call, torch.Generator], None]:
    """`indices` of a max-pool backward: the ones the forward really returns for `self`."""

    def fix(call: Call, gen: torch.Generator) -> None:
        x = call.get("self")
        fwd = getattr(torch.ops.aten, forward).default
        params = [
            call.get(n) for n in ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
        ]
        try:
            _, ind = fwd(x, *params)
        except RuntimeError:
            _, ind = fwd(x.float(), *params)
        _put(call, "indices", ind)

    return fix


def _normalize_output(kind: str) -> Callable[[Call, torch.Generator], None]:
    """`output` of a softmax/log_softmax backward: a real (log-)softmax of random logits."""

    def fix(call: Call, gen: torch.Generator) -> None:
        out = call.get("output")
        dim = call.get("dim", -1)
        fn = torch.softmax if kind == "softmax" else torch.log_softmax
        _put(call, "output", fn(out.float(), dim=dim))

    return fix


def _nll_classes(call: Call) -> int:
    shape = _shape(call.get("self"))
    return shape[0] if len(shape) == 1 else shape[1]


def _nll_fix(call: Call, gen: torch.Generator) -> None:
    """Mark 1/8 of the targets `ignore_index` (never the first), then recompute total_weight."""
    target = call.get("target")
    ignore = call.get("ignore_index", -100)
    classes = _nll_classes(call)
    n = target.numel()
    if isinstance(ignore, int) and not 0 <= ignore < classes and n >= 4:
        hit = torch.randperm(n - 1, generator=gen)[: n // 8] + 1
        flat = target.reshape(-1).clone()
        flat[hit] = ignore
        _put(call, "target", flat.reshape(target.shape))
        target = call.get("target")
    if call.has("total_weight"):
        valid = target != ignore
        weight = call.get("weight")
        picked = target[valid]
        total = weight[picked].sum() if weight is not None else valid.sum()
        _put(call, "total_weight", total.reshape(_shape(call.get("total_weight"))).float())


def _unique_along_dim(call: Call, gen: torch.Generator) -> None:
    """scatter without reduction: duplicate indices along `dim` make the result order-dependent."""
    if call.get("reduce") is not None:
        return  # scatter.reduce / value_reduce accumulate: duplicates are what they test
    idx, dim = call.get("index"), call.get("dim", 0)
    if not isinstance(idx, torch.Tensor) or idx.dim() == 0 or idx.numel() == 0:
        return
    dim %= idx.dim()
    size = call.size("self", dim)
    if idx.shape[dim] > size:
        return
    keys_shape = list(idx.shape)
    keys_shape[dim] = size
    perm = torch.rand(keys_shape, generator=gen).argsort(dim).narrow(dim, 0, idx.shape[dim])
    _put(call, "index", perm)


def _unique_flat(bound: Callable[[Call], int]) -> Callable[[Call, torch.Generator], None]:
    """index_copy / put without accumulation: each destination written once."""

    def fix(call: Call, gen: torch.Generator) -> None:
        if call.get("accumulate", False):
            return
        idx = call.get("index")
        n, limit = idx.numel(), bound(call)
        if 0 < n <= limit:
            _put(call, "index", torch.randperm(limit, generator=gen)[:n].reshape(idx.shape))

    return fix


def _unique_index_put(call: Call, gen: torch.Generator) -> None:
    """index_put without accumulation: distinct index tuples, so no write races."""
    if call.get("accumulate", False):
        return
    indices = list(call.get("indices"))
    call.set("indices", indices)
    self_shape = _shape(call.get("self"))
    slots, dim = [], 0
    for i, t in enumerate(indices):
        if t is not None and t.dtype in (torch.bool, torch.uint8):
            return  # masks select distinct positions by construction
        if t is not None:
            slots.append((i, self_shape[dim]))
        dim += 1
    tensors = [indices[i] for i, _ in slots]
    if not tensors or any(t.shape != tensors[0].shape for t in tensors):
        return
    n, limit = tensors[0].numel(), math.prod(b for _, b in slots)
    if not 0 < n <= limit:
        return
    flat = torch.randperm(limit, generator=gen)[:n]
    for i, b in reversed(slots):
        indices[i] = (flat % b).reshape(tensors[0].shape).to(indices[i].dtype)
        flat = flat // b


def _sorted(name: str) -> Callable[[Call, torch.Generator], None]:
    def fix(call: Call, gen: torch.Generator) -> None:
        t = call.get(name)
        _put(call, name, t.sort(dim=-1).values)

    return fix


def _bag_offsets(call: Call, gen: torch.Generator) -> None:
    """embedding_bag offsets: non-decreasing, starting at 0, within the number of indices."""
    offsets, indices = call.get("offsets"), call.get("indices")
    if not isinstance(offsets, torch.Tensor) or indices.dim() != 1 or offsets.numel() == 0:
        return
    n = indices.numel()
    values = torch.randint(0, n + 1, (offsets.numel(),), generator=gen).sort().values
    values[0] = 0
    if call.get("include_last_offset", False):
        values[-1] = n
    _put(call, "offsets", values.reshape(offsets.shape))


def _grouped_offsets(call: Call, gen: torch.Generator) -> None:
    """_grouped_mm offs: strictly increasing cumulative group ends along the split dimension (rows
    for 2d x 3d, columns for 3d x 2d, K for 2d x 2d), multiples of 16 where the size allows (the
    alignment real routers and the CUDA kernel use), the last one at the full size: rows after it
    would be left uninitialised by eager and could not be compared."""
    offs, a, b = call.get("offs"), call.get("self"), call.get("mat2")
    if not isinstance(offs, torch.Tensor) or offs.numel() == 0:
        return
    if a.dim() == 2 and b.dim() == 3:
        total = a.shape[0]
    elif a.dim() == 3 and b.dim() == 2:
        total = b.shape[1]
    elif a.dim() == 2 and b.dim() == 2:
        total = a.shape[1]
    else:
        return
    groups = offs.numel()
    unit = 16 if total % 16 == 0 and total // 16 >= groups else 1
    slots = total // unit
    if slots >= groups:  # distinct interior cuts: every group non-empty
        cuts = torch.randperm(slots - 1, generator=gen)[: groups - 1] + 1
    else:  # fewer places than groups: some groups are empty
        cuts = torch.randint(0, slots + 1, (groups - 1,), generator=gen)
    ends = torch.cat([cuts.sort().values * unit, torch.tensor([total])])
    _put(call, "offs", ends.to(offs.dtype).reshape(offs.shape))


def _fractional_exponent(call: Call) -> bool:
    e = call.get("exponent")
    return isinstance(e, float) and not e.is_integer()


def _each(names: str, rule: Rule) -> dict[str, Rule]:
    return {n: rule for n in names.split()}


_NLL = Rule({"target": index(_nll_classes)}, fix=_nll_fix)
_BN_FWD = Rule({"running_var": POSITIVE})
_BN_BWD = Rule({"running_var": POSITIVE, "save_invstd": POSITIVE, "save_var": POSITIVE})

# The one registry of per-op value overrides. Keys: overload (`pow.Tensor_Scalar`) or base name.
RULES: dict[str, Rule] = {
    # ---- indices that must be in range
    **_each("embedding", Rule({"indices": _along("weight", 0)})),
    "embedding_dense_backward": Rule({"indices": index(lambda c: c.get("num_weights"))}),
    **_each(
        "_embedding_bag _embedding_bag_forward_only embedding_bag",
        Rule({"indices": _along("weight", 0)}, fix=_bag_offsets),
    ),
    **_each(
        "gather index_select index_add index_add_ index_fill index_fill_",
        Rule({"index": _along("self")}),
    ),
    **_each("scatter scatter_", Rule({"index": _along("self")}, fix=_unique_along_dim)),
    **_each(
        "scatter_add scatter_add_ scatter_reduce scatter_reduce_", Rule({"index": _along("self")})
    ),
    **_each(
        "index_copy index_copy_",
        Rule({"index": _along("self")}, fix=_unique_flat(lambda c: c.size("self", "dim"))),
    ),
    **_each("index _unsafe_index", Rule({"indices": INDEX_LIST})),
    **_each(
        "index_put index_put_ _index_put_impl_ _unsafe_index_put",
        Rule({"indices": INDEX_LIST}, fix=_unique_index_put),
    ),
    "take": Rule({"index": index(lambda c: math.prod(_shape(c.get("self"))))}),
    **_each(
        "put put_",
        Rule(
            {"index": index(lambda c: math.prod(_shape(c.get("self"))))},
            fix=_unique_flat(lambda c: math.prod(_shape(c.get("self")))),
        ),
    ),
    "take_along_dim": Rule(
        {
            "indices": index(
                lambda c: (
                    c.size("self", c.get("dim"))
                    if c.get("dim") is not None
                    else math.prod(_shape(c.get("self")))
                )
            )
        }
    ),
    "one_hot": Rule(
        {"self": index(lambda c: c.get("num_classes") if c.get("num_classes", -1) > 0 else 8)}
    ),
    **_each(
        "nll_loss nll_loss_forward nll_loss_backward nll_loss2d_forward nll_loss2d_backward", _NLL
    ),
    "max_pool2d_with_indices_backward": Rule(fix=_maxpool_indices("max_pool2d_with_indices")),
    "max_pool3d_with_indices_backward": Rule(fix=_maxpool_indices("max_pool3d_with_indices")),
    "searchsorted": Rule(fix=_sorted("sorted_sequence")),
    "_grouped_mm": Rule(fix=_grouped_offsets),
    "bucketize": Rule(fix=_sorted("boundaries")),
    "repeat_interleave": Rule({"repeats": COUNT}),
    "bincount": Rule({"self": COUNT}),
    # ---- statistics that must be positive
    **_each(
        "native_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training", _BN_FWD
    ),
    **_each("_native_batch_norm_legit_functional cudnn_batch_norm miopen_batch_norm", _BN_FWD),
    **_each("native_batch_norm_backward cudnn_batch_norm_backward batch_norm_backward", _BN_BWD),
    **_each("native_layer_norm_backward native_group_norm_backward", Rule({"rstd": POSITIVE})),
    # ---- math domains
    **_each(
        "log log_ log2 log2_ log10 log10_ log1p log1p_ sqrt sqrt_ rsqrt rsqrt_",
        Rule({"self": POSITIVE}),
    ),
    **_each("asin asin_ acos acos_ atanh atanh_ erfinv erfinv_", Rule({"self": UNIT})),
    **_each("acosh acosh_", Rule({"self": GE1})),
    **_each("logit logit_", Rule({"self": PROB})),
    **_each("reciprocal reciprocal_", Rule({"self": NONZERO})),
    "pow.Tensor_Scalar": Rule({"self": Fill("positive", when=_fractional_exponent)}),
    "pow_.Scalar": Rule({"self": Fill("positive", when=_fractional_exponent)}),
    "pow.Tensor_Tensor": Rule({"self": POSITIVE, "exponent": COUNT}),
    "pow_.Tensor": Rule({"self": POSITIVE, "exponent": COUNT}),
    **_each(
        "div div_ remainder remainder_ fmod fmod_ floor_divide floor_divide_",
        Rule({"other": NONZERO}),
    ),
    **_each("addcdiv addcdiv_", Rule({"tensor2": NONZERO})),
    **_each(
        "bitwise_left_shift bitwise_left_shift_ bitwise_right_shift bitwise_right_shift_"
        " __lshift__ __ilshift__ __rshift__ __irshift__",
        Rule({"other": COUNT}),
    ),
    "polar": Rule({"abs": POSITIVE}),
    # ---- inputs that are probabilities or outputs of a known function
    **_each(
        "binary_cross_entropy binary_cross_entropy_backward", Rule({"self": PROB, "target": PROB})
    ),
    "binary_cross_entropy_with_logits": Rule({"target": PROB}),
    "sigmoid_backward": Rule({"output": PROB}),
    "tanh_backward": Rule({"output": UNIT}),
    "_softmax_backward_data": Rule(fix=_normalize_output("softmax")),
    "_log_softmax_backward_data": Rule(fix=_normalize_output("log_softmax")),
    **_each("grid_sampler_2d grid_sampler_3d", Rule({"grid": UNIT})),
}


def rule_for(op: str) -> Rule | None:
    """The registry entry for an overload: exact name first, then its base name."""
    op = normalize_op(op)
    return RULES.get(op) or RULES.get(base_name(op))


# ---------------------------------------------------------------- drawing values


def _draw(
    kind: str, dtype: torch.dtype, n: int, gen: torch.Generator, bound: int = 0
) -> torch.Tensor:
    """`n` values of `dtype` on the generator's device, following `kind`."""
    dev = gen.device
    if kind == BB_DEFAULT:
        return _draw_backendbench(dtype, n, gen)
    if dtype == torch.bool:
        if kind == "nonzero":
            return torch.ones(n, dtype=torch.bool, device=dev)
        return torch.randint(0, 2, (n,), generator=gen, device=dev).bool()
    if dtype.is_complex:
        wide = torch.complex128 if dtype == torch.complex128 else torch.complex64
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
            return torch.randn(n, generator=gen, dtype=wide, device=dev).to(dtype)
    if dtype.is_floating_point:
        wide = torch.float64 if dtype == torch.float64 else torch.float32
        if kind in ("index", "count"):
            lo, hi = (0, bound) if kind == "index" else COUNT_RANGE
            return torch.randint(lo, max(hi, lo + 1), (n,), generator=gen, device=dev).to(dtype)
        u = torch.rand(n, generator=gen, dtype=wide, device=dev)
        if kind == "positive":
            v = 0.1 + 2.9 * u
        elif kind == "nonzero":
            sign = torch.randint(0, 2, (n,), generator=gen, device=dev).to(wide) * 2 - 1
            v = sign * (0.25 + torch.randn(n, generator=gen, dtype=wide, device=dev).abs())
        elif kind == "unit":
            v = 1.9 * u - 0.95
        elif kind == "prob":
            v = 0.05 + 0.9 * u
        elif kind == "ge1":
            v = 1.0 + 3.0 * u
        else:
            v = torch.randn(n, generator=gen, dtype=wide, device=dev)
        return v.to(dtype)
    # integers
    signed = dtype != torch.uint8
    if kind == "index":
        return (
            torch.randint(0, max(bound, 1), (n,), generator=gen, device=dev).to(dtype)
            if bound > 0
            else torch.zeros(n, dtype=dtype, device=dev)
        )
    if kind == "count":
        return torch.randint(*COUNT_RANGE, (n,), generator=gen, device=dev).to(dtype)
    if kind in ("positive", "ge1", "prob"):
        return torch.randint(1, INT_RANGE[1], (n,), generator=gen, device=dev).to(dtype)
    if kind == "nonzero":
        mag = torch.randint(1, INT_RANGE[1], (n,), generator=gen, device=dev)
        sign = torch.randint(0, 2, (n,), generator=gen, device=dev) * 2 - 1 if signed else 1
        return (mag * sign).to(dtype)
    lo, hi = INT_RANGE if signed else UINT8_RANGE
    return torch.randint(lo, hi, (n,), generator=gen, device=dev).to(dtype)


def _draw_backendbench(dtype: torch.dtype, n: int, gen: torch.Generator) -> torch.Tensor:
    """`n` values drawn as BackendBench draws them (see the module contract)."""
    dev = gen.device
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=gen, device=dev).bool()
    if dtype.is_complex:
        wide = torch.float64 if dtype == torch.complex128 else torch.float32
        lo, hi = BB_COMPLEX_RANGE
        parts = lo + (hi - lo) * torch.rand(2, n, generator=gen, dtype=wide, device=dev)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
            return torch.complex(parts[0], parts[1]).to(dtype)
    if dtype.is_floating_point:
        wide = torch.float64 if dtype == torch.float64 else torch.float32
        return torch.rand(n, generator=gen, dtype=wide, device=dev).to(dtype)
    lo, hi = BB_UINT8_RANGE if dtype == torch.uint8 else BB_INT_RANGE
    return torch.randint(lo, hi, (n,), generator=gen, device=dev).to(dtype)


def _tensor(spec: TensorSpec, kind: str, gen: torch.Generator, bound: int = 0) -> torch.Tensor:
    flat = _draw(kind, spec.dtype, spec.storage_numel(), gen, bound)
    if spec.stride is None:
        return flat.reshape(spec.shape)
    return torch.as_strided(flat, spec.shape, spec.stride)


def _fill_value(
    value: Any, fill: Fill | None, call: Call, gen: torch.Generator, default: str = DEFAULT
) -> Any:
    """Draw every TensorSpec inside `value` (recursing into lists and tuples); values no rule
    covers are drawn as `default` says."""
    if isinstance(value, TensorSpec):
        if (
            fill is None
            or fill.kind == "index_list"
            or (fill.when is not None and not fill.when(call))
        ):
            return _tensor(value, default, gen)
        bound = fill.bound(call) if fill.bound is not None else 0
        return _tensor(value, fill.kind, gen, int(bound))
    if isinstance(value, list | tuple):
        if fill is not None and fill.kind == "index_list":
            return type(value)(_index_list(value, call, gen, default))
        return type(value)(_fill_value(v, fill, call, gen, default) for v in value)
    return value


def _index_list(
    entries: list[Any] | tuple[Any, ...], call: Call, gen: torch.Generator, default: str = DEFAULT
) -> list[Any]:
    """`Tensor?[] indices`: entry i indexes the next dim(s) of `self`; masks cover their ndim dims."""
    self_shape = _shape(call.get("self"))
    out: list[Any] = []
    dim = 0
    for entry in entries:
        if isinstance(entry, TensorSpec) and entry.dtype in (torch.bool, torch.uint8):
            out.append(_tensor(entry, default, gen))
            dim += max(len(entry.shape), 1)
        elif isinstance(entry, TensorSpec):
            bound = self_shape[dim] if dim < len(self_shape) else 1
            out.append(_tensor(entry, "index", gen, bound))
            dim += 1
        else:
            out.append(entry)
            dim += 1
    return out


# ---------------------------------------------------------------- moving to the device


def _to_device(value: Any, device: torch.device, rewrite_str: bool = False) -> Any:
    if isinstance(value, torch.Tensor):
        return _tensor_to(value, device)
    if isinstance(value, Device | torch.device):
        return device
    if rewrite_str and isinstance(value, str):
        return str(device)
    if isinstance(value, list | tuple):
        return type(value)(_to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to_device(v, device, rewrite_str=(k == "device")) for k, v in value.items()}
    return value


def _tensor_to(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Move a tensor keeping its strides: the whole backing buffer moves, then the same view."""
    if t.device == device:
        return t
    if t.is_contiguous() and t.storage_offset() == 0:
        return t.to(device)
    size = t.untyped_storage().nbytes() // t.element_size()
    base = torch.as_strided(t, (size,), (1,), 0).to(device)
    return base.as_strided(t.shape, t.stride(), t.storage_offset())


# ---------------------------------------------------------------- entry point


@functools.lru_cache(maxsize=4096)
def _schema(op: str) -> torch.FunctionSchema | None:
    """The ATen schema of a normalized overload name; None for names ATen does not know."""
    base, _, overload = op.partition(".")
    try:
        return getattr(getattr(torch.ops.aten, base), overload)._schema
    except (AttributeError, RuntimeError):
        return None


def materialize(
    op: str, case: TestCase, device: str | torch.device, seed: int, *, profile: str = "strict"
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Real (args, kwargs) for `case` of `op` on `device`, drawn reproducibly from `seed`;
    `profile="backendbench"` draws default values as BackendBench does."""
    default = BB_DEFAULT if profile == "backendbench" else DEFAULT
    target = torch.device(device)
    rule = rule_for(op) or Rule()
    # On a GPU, draw on the GPU: drawing a 25M-element activation on the CPU and copying it over
    # costs ~0.5 s per tensor, and the sandbox materialises every case twice per candidate. Values
    # are then reproducible per device type (CPU and CUDA streams differ). Rules that post-process
    # values (`fix`) work on CPU tensors, so those ops keep drawing on the CPU.
    on_device = target.type == "cuda" and rule.fix is None
    gen = torch.Generator(device=target if on_device else "cpu").manual_seed(seed)
    schema = _schema(normalize_op(op))
    specs = Call(schema, list(case.args), dict(case.kwargs))
    names = [a.name for a in schema.arguments if not a.kwarg_only] if schema is not None else []
    args = [
        _fill_value(v, rule.fills.get(names[i]) if i < len(names) else None, specs, gen, default)
        for i, v in enumerate(case.args)
    ]
    kwargs = {
        k: _fill_value(v, rule.fills.get(k), specs, gen, default) for k, v in case.kwargs.items()
    }
    if rule.fix is not None:
        with torch.no_grad():
            rule.fix(Call(schema, args, kwargs), gen)
    # A device is written as a string ('cuda'); where the schema takes a Device positionally,
    # the string names the device too.
    devices = {i for i, a in enumerate(names) if "Device" in str(schema.arguments[i].type)}
    args = [str(target) if i in devices and isinstance(a, str) else a for i, a in enumerate(args)]
    return tuple(_to_device(a, target) for a in args), _to_device(kwargs, target)
