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
