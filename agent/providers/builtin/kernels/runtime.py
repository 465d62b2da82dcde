"""Runtime helpers that emitted kernel files share: the one copy the writer inlines into each file.

Nothing imports this module at run time; `kernelsource.runtime(name)` copies a definition (or a
`# region NAME` block) into the emitted text, where it must work with only torch, triton and
triton.language imported.
"""

import functools
import os

import torch
import triton
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_OP = "aten::op"  # each emitted file's header names its operator


def _cdiv(a, b):
    return -(-a // b)


def _pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


@functools.lru_cache(maxsize=None)
def _num_sms(index):
    return torch.cuda.get_device_properties(index).multi_processor_count


# Programmatic dependent launch (sm_90+), for files that launch kernels one after another: the
# later kernel takes a `PDL_WAIT` constexpr, is launched with `**_pdl_launch(flag)` and calls
# `_pdl_enter(PDL_WAIT, ...)` before it touches memory; the earlier one calls
# `_pdl_enter(False, PDL_NEXT)` so that the next launch starts while its last programs run.
def _pdl_ok(device):
    """Programmatic dependent launches: CUDA devices of compute capability 9.0 and up."""
    return (not _INTERPRET and device.type == "cuda"
            and torch.cuda.get_device_capability(device)[0] >= 9)


def _pdl_launch(pdl):
    """Launch keywords of a kernel that may be a programmatic dependent: the launch option, and
    its PDL_WAIT constexpr (a kernel without that parameter cannot be launched this way, and one
    launched this way waits: `_pdl_enter(PDL_WAIT, ...)` is its first statement)."""
    return {"launch_pdl": True, "PDL_WAIT": True} if pdl else {"PDL_WAIT": False}


@triton.jit
def _pdl_enter(WAIT: tl.constexpr, TRIGGER: tl.constexpr):
    """WAIT (this grid was launched as a dependent): block until the grid before it has
    finished and its writes are visible. TRIGGER: the next dependent launch may start now."""
    if WAIT:
        tl.extra.cuda.gdc_wait()
    if TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()


# Gluon (Triton's explicit-layout dialect) for kernels that hold data in shared memory, which
# plain Triton cannot allocate: `gluon` is None where it cannot be used, and the file keeps its
# plain-Triton path. Gluon is experimental and its surface moves between releases: the copy and
# barrier names are the ones of Triton 3.6 (measured on the H200) and 3.9 (compiled); another
# release, or one without Gluon, keeps the plain kernels.
# region gluon
_GLUON_TRITONS = ((3, 6), (3, 9))  # the releases it was written for, oldest and newest
gluon = None
if _GLUON_TRITONS[0] <= tuple(int(v) for v in triton.__version__.split(".")[:2]) <= _GLUON_TRITONS[1]:
    try:
        from triton.experimental import gluon
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.language.nvidia.ampere import async_copy
        _gl_copy = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared
        _gl_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
    except (ImportError, AttributeError):
        gluon = None
# endregion gluon


# Torch -> Triton dtypes and the dtype arithmetic runs in.
# region dtypes
_TL_DTYPE = {
    torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16,
    torch.float32: tl.float32,
    torch.float64: tl.float64,
    torch.int8: tl.int8,
    torch.uint8: tl.uint8,
    torch.int16: tl.int16,
    torch.int32: tl.int32,
    torch.int64: tl.int64,
    torch.bool: tl.int1,
}


def _compute_dtype(dtype):
    """The dtype arithmetic runs in: f16/bf16 widen to f32 (as eager's opmath does; Triton's CPU
    interpreter also gets bf16 arithmetic wrong otherwise), bool widens to int32."""
    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return tl.float32
    if dtype == torch.bool:
        return tl.int32
    if dtype not in _TL_DTYPE:
        raise TypeError(f"{_OP}: dtype {dtype} is not supported by this kernel")
    return _TL_DTYPE[dtype]
# endregion dtypes


# After a kernel's first launch with a given specialization, later launches call Triton's compiled
# launcher directly (Triton's own per-call bookkeeping costs more host time than most torchbench
# cases take on the GPU).
# region fast_launch
_T = torch.Tensor
_TRITON_VERSION = tuple(int(p) for p in triton.__version__.split(".")[:2])
_NO_DEFAULT = object()
# argument types keyed by value (constexpr dtypes and strings passed positionally)
_VALUE_TYPES = (tl.dtype, str, tl.constexpr)
_current_device = torch._C._cuda_getDevice if hasattr(torch._C, "_cuda_getDevice") else None
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


class _FastLaunch:
    """`kernel[grid](...)` that, after the first launch of a specialization, calls the compiled
    kernel's launcher directly.

    Triton's launch path re-derives every argument's specialization, formats a cache key and looks
    the compiled kernel up on each call: 20-40 us of host time per launch on the lent H200's host,
    more than most torchbench cases take on the GPU. The key here covers everything Triton
    specializes on, and more: tensor dtypes, devices and 16-byte alignment, exact int and bool
    values, the types of floats, keyword (constexpr and option) values, the current device. A
    miss goes through Triton (compiling when needed), which returns the compiled kernel kept for
    the next call. Grids
    given as callables, non-CUDA or not 16-byte aligned tensors (rare: views at odd offsets; kept
    on Triton's path until the cached path is verified on them on a GPU) and unknown argument types
    always take Triton's own path; while a profiler's launch hooks are installed, nothing new is
    cached.
    """

    def __init__(self, fn):
        self.fn = fn
        # (name, default or _NO_DEFAULT) per parameter, in launch order
        self.params = [
            (p.name, _NO_DEFAULT if p.default is p.empty else p.default)
            for p in fn.signature.parameters.values()
        ]
        self.cache = {}

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def launch(self, grid, args, kwargs):
        if type(grid) is not tuple:
            return self.fn[grid](*args, **kwargs)
        # one comprehension (this runs per launch, over up to ~40 arguments)
        spec = [
            (a.dtype, a.is_cuda, a.data_ptr() % 16 == 0)
            if (t := type(a)) is _T
            else a
            if t is int
            else float
            if t is float
            else (t, a)
            for a in args
        ]
        device = _current_device()
        key = (*spec, *kwargs.items(), *map(type, kwargs.values()), device)
        try:
            hit = self.cache.get(key)
        except TypeError:  # an unhashable argument: Triton's own path
            return self.fn[grid](*args, **kwargs)
        if hit is None:
            return self._miss(key, grid, args, kwargs)
        launcher, function, metadata, rest = hit
        if rest:
            args = args + tuple([kwargs[n] if n in kwargs else d for n, d in rest])
        n = len(grid)
        launcher(
            grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1,
            _raw_stream(device), function, metadata, None, None, None, *args,
        )

    def _miss(self, key, grid, args, kwargs):
        """Launch through Triton and keep the compiled kernel for this key (unless a profiler's
        launch hooks are installed: those must see every launch, so nothing is cached then)."""
        compiled = self.fn[grid](*args, **kwargs)
        if compiled is None or not hasattr(compiled, "packed_metadata") or _hooks_set():
            return compiled
        for a in args:  # only argument kinds whose specialization the key captures
            t = type(a)
            if (t is _T and not (a.is_cuda and a.data_ptr() % 16 == 0)) or not (
                t in (_T, int, float, bool) or a is None or t in _VALUE_TYPES
            ):
                return compiled
        rest = tuple(self.params[len(args):])
        if any(name not in kwargs and default is _NO_DEFAULT for name, default in rest):
            return compiled
        if len(self.cache) > 256:
            self.cache.clear()
        self.cache[key] = (compiled.run, compiled.function, compiled.packed_metadata, rest)
        return compiled


def _hooks_set():
    """True when a profiler installed Triton launch hooks (they must see every launch)."""
    if _KNOBS is None:
        return False
    runtime = _KNOBS.runtime
    for hook in (runtime.launch_enter_hook, runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):  # 3.9: an empty HookChain
            return True
    return False


try:
    from triton import knobs as _KNOBS
except ImportError:  # older Triton: no launch hooks to honour
    _KNOBS = None


def _fast_launch(fn):
    """Wrap a JIT kernel (Triton 3.4-3.9 launcher convention); anything else is returned as is
    (the CPU interpreter's kernels, other Triton versions)."""
    from triton.runtime.jit import JITFunction

    if (
        isinstance(fn, JITFunction)
        and (3, 4) <= _TRITON_VERSION <= (3, 9)
        and _current_device is not None
        and _raw_stream is not None
    ):
        return _FastLaunch(fn)
    return fn
# endregion fast_launch
