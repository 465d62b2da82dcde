"""How a kernel's own errors read to the person who wrote the kernel.

Contract:
- `load_error_reason(error_type, error_msg) -> str`: the reason of a kernel that would not import.
  One line `Type: message` (never the type twice); a syntax error reads
  `SyntaxError: invalid syntax (FILE, line N)` followed by the offending line and the caret, as
  Python prints them, so the console can show where it is.
- `show_user_path(result, sandbox_file, user_file)`: the sandbox runs a copy of the kernel in a
  scratch folder; every message of the verdict that names the copy names the user's file instead.
"""

from __future__ import annotations

import re

from evaluator.results import OperatorResult

_SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
# The first line Python prints for a syntax error: `  File "PATH", line N`.
_FILE_LINE = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+)')


def load_error_reason(error_type: str, error_msg: str) -> str:
    """`Type: message` of an import failure; syntax errors keep their source line and caret."""
    msg = (error_msg or "").strip()
    if error_type in _SYNTAX_ERRORS:
        lines = msg.splitlines()
        where = _FILE_LINE.match(lines[0]) if lines else None
        if where is not None:
            last = lines[-1].strip()
            headline = last if last.startswith(f"{error_type}:") else f"{error_type}: {last}"
            source = [line.rstrip() for line in lines[1:-1] if line.strip()]
            head = f"{headline} ({where['file']}, line {where['line']})"
            return "\n".join([head, *source])
    if msg.startswith(f"{error_type}:") or msg == error_type:
        return msg
    return f"{error_type}: {msg}" if msg else error_type


def show_user_path(result: OperatorResult, sandbox_file: str, user_file: str) -> OperatorResult:
    """Name `user_file` wherever the verdict's messages name the sandbox's copy `sandbox_file`."""
    if not sandbox_file or sandbox_file == user_file:
        return result
    result.reason = result.reason.replace(sandbox_file, user_file)
    for test in result.results:
        if test.error_msg:
            test.error_msg = test.error_msg.replace(sandbox_file, user_file)
    return result
