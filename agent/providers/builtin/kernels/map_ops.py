"""Operators built on the map kernels: constant_pad_nd, slice/select backward, repeat, roll (their
plans as input-coordinate maps).
"""

import torch

from agent.providers.builtin.kernels.map_flat import _map, _map_run, _planned
from agent.providers.builtin.kernels.pieces import _launch_pieces, _pieces_plan
from agent.providers.builtin.kernels.tiles import (
    _contiguous_strides,
    _scalar_for,
    _wrap_dim,
)

# ---- emitted: map_ops ----


def _constant_pad_nd(self, pad, value=0):
    key = ("pad", self.shape, self.stride(), self.dtype, self.device, tuple(pad), value)
    return _planned(key, lambda: _pad_plan(self, list(pad), value))(self)


def _pad_plan(self, pad, value):
    if len(pad) % 2 != 0:
        raise RuntimeError(f"Length of pad must be even but instead it equals {len(pad)}")
    if len(pad) // 2 > self.dim():
        raise RuntimeError("Length of pad should be no more than twice the number of dimensions of the input.")
    plan = []
    for d in range(self.dim()):
        k = self.dim() - 1 - d
        lo, hi = (pad[2 * k], pad[2 * k + 1]) if 2 * k < len(pad) else (0, 0)
        n_in = self.shape[d]
        n_out = n_in + lo + hi
        if n_out < 0:
            raise RuntimeError(f"The input size {n_in}, plus negative padding {lo} and {hi} resulted in a negative output size")
        plan.append((n_out, n_in, lo, 1))
    shape = list(self.shape)
    if not any(pad) and self.numel() > 0:
        # no padding: a plain copy (dims merged, so a dense input is one flat, vectorized pass)
        launches, leftovers = _pieces_plan([(0, shape, list(self.stride()), _contiguous_strides(shape), 0)])
        if not leftovers:
            dtype, device = self.dtype, self.device

            def run(x):
                out = torch.empty(shape, dtype=dtype, device=device)
                for grid, _, ints, consts in launches:
                    _launch_pieces(grid, out, [x], ints, consts)
                return out

            return run
    return _map_run(list(self.stride()), plan, False, _scalar_for(value, self.dtype), self.dtype, self.device)


def _slice_backward(grad_output, input_sizes, dim, start, end, step):
    key = ("slice", grad_output.shape, grad_output.stride(), grad_output.dtype, grad_output.device,
           tuple(input_sizes), dim, start, step)
    return _planned(key, lambda: _slice_backward_plan(grad_output, input_sizes, dim, start, step))(grad_output)


def _slice_backward_plan(grad_output, input_sizes, dim, start, step):
    sizes = [int(s) for s in input_sizes]
    dim = _wrap_dim(dim, len(sizes))
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    size = sizes[dim]
    if start < 0:
        start += size
    start = min(max(start, 0), size)
    plan = [(s, s, 0, 1) for s in sizes]
    plan[dim] = (size, grad_output.shape[dim], start, step)
    return _map_run(list(grad_output.stride()), plan, False, _scalar_for(0, grad_output.dtype),
                    grad_output.dtype, grad_output.device)


def _select_backward(grad_output, input_sizes, dim, index):
    key = ("select", grad_output.shape, grad_output.stride(), grad_output.dtype, grad_output.device,
           tuple(input_sizes), dim, index)
    return _planned(key, lambda: _select_backward_plan(grad_output, input_sizes, dim, index))(grad_output)


def _select_backward_plan(grad_output, input_sizes, dim, index):
    sizes = [int(s) for s in input_sizes]
    dim = _wrap_dim(dim, len(sizes))
    size = sizes[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {sizes} at dimension {dim}")
    index %= size
    strides = list(grad_output.stride())
    strides.insert(dim, 0)  # grad_output seen with a size-1 dim at `dim`
    plan = [(s, s, 0, 1) for s in sizes]
    plan[dim] = (size, 1, index, 1)
    return _map_run(strides, plan, False, _scalar_for(0, grad_output.dtype), grad_output.dtype,
                    grad_output.device)


def _repeat(self, repeats):
    key = ("repeat", self.shape, self.stride(), self.dtype, self.device, tuple(repeats))
    return _planned(key, lambda: _repeat_plan(self, repeats))(self)


def _repeat_plan(self, repeats):
    repeats = [int(r) for r in repeats]
    if len(repeats) < self.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    if any(r < 0 for r in repeats):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {repeats}")
    pad = len(repeats) - self.dim()
    in_shape = [1] * pad + list(self.shape)
    strides = [0] * pad + list(self.stride())
    plan = [(n * r, n, 0, 1) for n, r in zip(in_shape, repeats)]
    return _map_run(strides, plan, True, None, self.dtype, self.device)


def _roll(self, shifts, dims=()):
    if not dims:
        return _roll_flat(self, shifts)
    key = ("roll", self.shape, self.stride(), self.dtype, self.device, tuple(shifts), tuple(dims))
    return _planned(key, lambda: _roll_plan(self, shifts, dims))(self)


def _roll_flat(self, shifts):
    shifts = [int(s) for s in shifts]
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    if out.numel() == 0:
        return out
    if len(shifts) != 1:
        raise RuntimeError(f"`shifts` required to be of size 1 when `dims` is empty, got {len(shifts)}")
    x = self.contiguous()
    n = x.numel()
    flat = out.view(-1)
    return _map(x, [1], flat, [(n, n, shifts[0] % n, 1)], wrap=True).view(self.shape)


def _roll_plan(self, shifts, dims):
    shifts = [int(s) for s in shifts]
    dims = [int(d) for d in dims]
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    total = [0] * self.dim()
    for s, d in zip(shifts, dims):
        total[_wrap_dim(d, self.dim())] += s
    plan = [(n, n, total[d] % n if n else 0, 1) for d, n in enumerate(self.shape)]
    return _map_run(list(self.stride()), plan, True, None, self.dtype, self.device)
