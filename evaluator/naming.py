"""Names that tie an ATen overload to its kernel on disk (design §4, BackendBench DirectoryBackend).

`add.Tensor` lives in folder `add__Tensor`, file `add__Tensor_implementation_v1.py`, function
`add__Tensor_kernel_impl`. Every part of atenforge derives these names from here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

KERNEL_VERSION = 1


def op_to_folder(op: str) -> str:
    """`add.Tensor` -> `add__Tensor`; `add_.Tensor` -> `add___Tensor`; a bare name gets `.default`."""
    op = normalize_op(op)
    return op.replace(".", "__")


def folder_to_op(folder: str) -> str:
    """Inverse of `op_to_folder`: the last `__` separates the base name from the overload."""
    base, sep, overload = folder.rpartition("__")
    if not sep or not base or not overload:
        raise ValueError(f"kernel folder {folder!r} is not of the form <name>__<overload>")
    return f"{base}.{overload}"


def normalize_op(op: str) -> str:
    """Accept `aten.add.Tensor`, `aten::add.Tensor` or `add.Tensor`; return `add.Tensor`."""
    op = op.strip()
    for prefix in ("aten::", "aten."):
        if op.startswith(prefix):
            op = op[len(prefix) :]
    if "." not in op:
        op = f"{op}.default"
    return op


def kernel_function_name(op: str) -> str:
    return f"{op_to_folder(op)}_kernel_impl"


def kernel_file_name(op: str, version: int = KERNEL_VERSION) -> str:
    return f"{op_to_folder(op)}_implementation_v{version}.py"


def kernel_path(kernels_dir: Path | str, op: str, version: int = KERNEL_VERSION) -> Path:
    return Path(kernels_dir) / op_to_folder(op) / kernel_file_name(op, version)


def base_name(op: str) -> str:
    """`add.Tensor` -> `add`; `add_.Tensor` -> `add_`."""
    return normalize_op(op).split(".", 1)[0]
