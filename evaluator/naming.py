"""Names that tie an ATen overload to its kernel on disk (BackendBench's DirectoryBackend layout).

`add.Tensor` lives in folder `add__Tensor`, file `add__Tensor_implementation_v1.py` (what the agent
writes), function `add__Tensor_kernel_impl`. Every part of atenforge derives these names from here
and nowhere else.

Reading a folder, the file judged is the one BackendBench loads: the first, in sorted order, of
the files named `<folder>_implementation*.py` (`find_kernel_file`); another glob picks another.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

KERNEL_VERSION = 1
# The files of an operator's folder that hold a kernel; `{folder}` is the folder's name.
DEFAULT_KERNEL_GLOB = "{folder}_implementation*.py"


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


def kernel_files(
    kernels_dir: Path | str, op: str, pattern: str = DEFAULT_KERNEL_GLOB
) -> list[Path]:
    """The files of `op`'s folder whose name matches `pattern` (`{folder}` replaced by the
    folder's name), sorted by name."""
    folder = Path(kernels_dir) / op_to_folder(op)
    glob = pattern.replace("{folder}", folder.name)
    try:
        names = sorted(
            p.name for p in folder.iterdir() if fnmatchcase(p.name, glob) and p.is_file()
        )
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [folder / name for name in names]


def find_kernel_file(
    kernels_dir: Path | str, op: str, pattern: str = DEFAULT_KERNEL_GLOB
) -> Path | None:
    """The kernel file judged for `op`: the first of `kernel_files`; None when there is none."""
    files = kernel_files(kernels_dir, op, pattern)
    return files[0] if files else None
