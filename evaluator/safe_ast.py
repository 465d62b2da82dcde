"""`ast.parse` that threads of one process can call at the same time, on every CPython.

CPython 3.11.0-3.11.7 and 3.12.0-3.12.1 keep the counter that guards the depth of the tree
`ast.parse` builds in interpreter-wide state. When the GIL changes hands while a tree is being
built (a garbage collection runs a finalizer written in Python), another thread's `ast.parse`
moves the same counter, and one of them fails with `SystemError: AST constructor recursion depth
mismatch`. CPython 3.11.8 and 3.12.2 give each call its own counter. On 3.11.7 it happens (the
stress in tests/integration/ast_stress.py raises it within a tenth of a second), and the agent's workers run
in threads while the builtin writer, the code extraction and the case parser parse Python.

Contract:
- `parse(source, filename="<unknown>", mode="exec")` is `ast.parse` under one process-wide
  re-entrant lock (a finalizer that parses on the thread holding it still goes through). Our own
  code parses through it on every interpreter; the cost is one uncontended lock per parse.
- `AFFECTED` is True on the interpreters with the bug. `install()` then makes `ast.parse` itself
  the locked one for the whole process, so the parses of libraries (Triton's JIT, the traceback
  module's error carets) are serialised with ours; elsewhere it does nothing. It is idempotent.
  The agent calls it when a session starts; the evaluator's sandbox child never does.
"""

from __future__ import annotations

import ast
import sys
import threading
from typing import Any

_original_parse = ast.parse
_LOCK = threading.RLock()


def _affected(version: tuple[int, int, int]) -> bool:
    return (3, 11, 0) <= version < (3, 11, 8) or (3, 12, 0) <= version < (3, 12, 2)


AFFECTED = _affected(tuple(sys.version_info[:3]))


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec", **kw: Any) -> Any:
    with _LOCK:
        return _original_parse(source, filename, mode, **kw)


def install() -> bool:
    """Route every `ast.parse` of this process through the lock where CPython needs it; True
    when it is routed (now or before)."""
    if not AFFECTED:
        return False
    ast.parse = parse
    return True
