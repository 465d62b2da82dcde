"""The evaluator's verdict on a candidate, as text for the next round's prompt.

Contract: `format_feedback(result, max_chars) -> str`, never longer than `max_chars`. It says, most
useful first: the status and how many tests passed, the reason, the flags, the largest errors,
then the first failing tests with their arguments, error type and message and errors. When the
budget runs out, later failing tests are dropped before earlier ones, and a long error message
keeps its head and its tail (a traceback's last line names the exception, its first the frame).
"""

from __future__ import annotations

import math

from evaluator.results import OperatorResult, TestResult

# The first failing test is what the model can act on; a few more show whether it is systematic.
MAX_FAILING_TESTS = 5
ELLIPSIS = " … "


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, str):  # inf/nan written as strings by to_json round-trips
        return value
    if not math.isfinite(value):
        return str(value)
    return f"{value:.3g}"


def _squeeze(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, keeping its head and (the larger part) its tail."""
    text = text.strip()
    if len(text) <= limit:
        return text
    if limit <= len(ELLIPSIS) + 2:
        return text[:limit]
    room = limit - len(ELLIPSIS)
    head = room // 3
    return text[:head] + ELLIPSIS + text[len(text) - (room - head) :]


def _test_block(index: int, test: TestResult, message_chars: int) -> str:
    lines = [f"{index}. args: {_squeeze(test.args, max(120, message_chars))}"]
    if test.error_type or test.error_msg:
        kind = test.error_type or "error"
        msg = _squeeze(test.error_msg or "", message_chars).replace("\n", "\n   ")
        lines.append(f"   {kind}: {msg}" if msg else f"   {kind}")
    if test.max_abs_error is not None or test.max_rel_error is not None:
        lines.append(
            f"   max abs error {_number(test.max_abs_error)}, "
            f"max rel error {_number(test.max_rel_error)}"
        )
    if test.flags:
        lines.append(f"   flags: {', '.join(test.flags)}")
    return "\n".join(lines)


def _header(result: OperatorResult) -> list[str]:
    counts = f"{result.passed} of {result.tests} tests passed"
    if result.skipped_tests:
        counts += f", {result.skipped_tests} skipped"
    lines = [f"Status: {result.status} ({counts})."]
    if result.reason:
        lines.append(f"Reason: {result.reason.strip()}")
    if result.flags:
        lines.append(f"Flags: {', '.join(result.flags)}")
    max_abs = result.max_error("max_abs_error")
    max_rel = result.max_error("max_rel_error")
    if max_abs is not None or max_rel is not None:
        lines.append(
            f"Largest errors over all tests: abs {_number(max_abs)}, rel {_number(max_rel)}"
        )
    return lines


def format_feedback(result: OperatorResult, max_chars: int) -> str:
    """The verdict as text within `max_chars`, most useful parts first (see module docstring)."""
    header = "\n".join(_header(result))
    if len(header) >= max_chars:
        return _squeeze(header, max_chars)
    failing = [t for t in result.results if not t.passed and not t.skipped]
    if not failing:
        return header
    parts = [header, f"Failing tests ({min(len(failing), MAX_FAILING_TESTS)} of {len(failing)}):"]
    used = sum(len(p) + 1 for p in parts)
    if used >= max_chars:
        return header
    # The first failing test gets most of the room; later ones share what is left.
    message_chars = max(80, (max_chars - used) // 2)
    for index, test in enumerate(failing[:MAX_FAILING_TESTS], start=1):
        block = _test_block(index, test, message_chars)
        room = max_chars - used - 1
        if len(block) > room and index == 1:
            # Shrink the error message first: the arguments and error type matter more.
            shrunk = message_chars - (len(block) - room) - 8
            if shrunk >= 40:
                block = _test_block(index, test, shrunk)
        if len(block) > room:
            if index == 1 and room > 80:
                parts.append(_squeeze(block, room))
            elif index == 1:
                parts.pop()  # no room for even one failing test: drop its heading too
            break
        parts.append(block)
        used += len(block) + 1
        message_chars = max(80, message_chars // 2)
    text = "\n".join(parts)
    assert len(text) <= max_chars, "format_feedback overran its budget"
    return text
