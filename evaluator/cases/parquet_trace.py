"""BackendBench's parquet test sets: read them as a `Trace`, and write ours in that format.

The format (BackendBench's torchbench test set, e.g. GPUMODE/backendbench_tests): one row per
case with columns `uuid` (sha256 of the args string followed by the operator name, as BackendBench
computes it), `op_name` (`aten.add.Tensor`), `args` (a serialized case), `count` (int64; 0 =
synthetic), `is_synthetic`, `included_in_benchmark` and `is_overhead_dominated_op` (bools).

Contract:
- `load_parquet_trace(path) -> Trace`: rows with `included_in_benchmark` false are left out, as
  BackendBench leaves them out; a repeated (op, args) row is read once; a row whose args do not
  parse is an error `path:row N: reason` and the other rows still load.
- `write_parquet_trace(cases, path)`: one row per case, in the order given.
- pyarrow is optional (`pip install 'atenforge[parquet]'`); without it both raise a one-line
  UsageError that says so.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from evaluator.cases.testcase import CaseSyntaxError, TestCase, Trace, parse_case
from evaluator.errors import UsageError
from evaluator.naming import normalize_op

COLUMNS = (
    "uuid",
    "op_name",
    "args",
    "count",
    "is_synthetic",
    "included_in_benchmark",
    "is_overhead_dominated_op",
)
_REQUIRED = ("op_name", "args")
INSTALL_HINT = "pip install 'atenforge[parquet]'"


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError(
            f"parquet traces need pyarrow, which is not installed: {INSTALL_HINT}"
        ) from None
    return pa, pq


def case_uuid(op_name: str, args: str) -> str:
    """BackendBench's row id: sha256 of the args string followed by the `aten.`-prefixed name."""
    return hashlib.sha256(args.encode() + op_name.encode()).hexdigest()


def load_parquet_trace(path: Path | str) -> Trace:
    _, pq = _pyarrow()
    path = Path(path)
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise UsageError(
            f"cannot read '{path}' as parquet ({type(exc).__name__}): pass a BackendBench parquet test set."
        ) from None
    missing = [c for c in _REQUIRED if c not in table.column_names]
    if missing:
        raise UsageError(
            f"'{path}' has no column {', '.join(missing)}: pass a BackendBench parquet test set "
            f"(columns {', '.join(COLUMNS)})."
        )
    cases: dict[str, list[TestCase]] = {}
    seen: set[tuple[str, str]] = set()
    errors: list[str] = []
    for index, row in enumerate(table.to_pylist(), start=1):
        if row.get("included_in_benchmark") is False:
            continue
        name, args = row.get("op_name"), row.get("args")
        if not isinstance(name, str) or not isinstance(args, str) or not name.strip():
            errors.append(f"{path}:row {index}: op_name and args must be strings")
            continue
        op = normalize_op(name)
        if (op, args.strip()) in seen:
            continue
        seen.add((op, args.strip()))
        try:
            case = parse_case(args)
        except CaseSyntaxError as exc:
            errors.append(f"{path}:row {index}: {exc}")
            continue
        count = row.get("count")
        case.count = count if isinstance(count, int) and count >= 0 else 0
        cases.setdefault(op, []).append(case)
    return Trace(cases=cases, errors=errors)


def write_parquet_trace(cases: dict[str, list[TestCase]], path: Path | str) -> Path:
    """Write `cases` (by overload name) as a BackendBench parquet test set at `path`."""
    pa, pq = _pyarrow()
    rows: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for op, op_cases in cases.items():
        name = f"aten.{normalize_op(op)}"
        for case in op_cases:
            args = case.serialize()
            rows["uuid"].append(case_uuid(name, args))
            rows["op_name"].append(name)
            rows["args"].append(args)
            rows["count"].append(int(case.count))
            rows["is_synthetic"].append(case.count == 0)
            rows["included_in_benchmark"].append(True)
            rows["is_overhead_dominated_op"].append(False)
    schema = pa.schema(
        [
            ("uuid", pa.string()),
            ("op_name", pa.string()),
            ("args", pa.string()),
            ("count", pa.int64()),
            ("is_synthetic", pa.bool_()),
            ("included_in_benchmark", pa.bool_()),
            ("is_overhead_dominated_op", pa.bool_()),
        ]
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(pa.table(rows, schema=schema), tmp)
    tmp.replace(path)
    return path
