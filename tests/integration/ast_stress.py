"""Threads that parse Python while the collector runs Python finalizers inside their parses: the
conditions under which CPython 3.11.0-3.11.7 / 3.12.0-3.12.1 raise `SystemError: AST constructor
recursion depth mismatch` (see evaluator.safe_ast). Each parse is preceded by a little cyclic
garbage whose `__del__` runs when the parse's own allocations trigger a collection, and the
threads start and stop in waves (the race shows most then); on CPython 3.11.7 a bare `ast.parse`
fails within a tenth of a second.

`python tests/integration/ast_stress.py MODE SECONDS` prints one JSON line {"errors", "parses", "seconds"} and
stops at the first SystemError or after SECONDS. MODE `raw`: the threads call `ast.parse`;
`paths`: they take the project's own parsing paths (code extraction, case parsing, the builtin
writer's launcher scan), without `safe_ast.install()`, so an unguarded call among them shows.
A subprocess of its own: the GC thresholds and switch interval it sets would disturb pytest.
"""

from __future__ import annotations

import ast
import gc
import json
import sys
import threading
import time

NUM_PARSERS = 4
PARSES_PER_WAVE = 3
LITTER_PER_PARSE = 3
SOURCE = "\n".join(
    f"def f{i}(a, b):\n    return [(a + b * {i}) if a else {{'k': (b, a)}} for _ in range(3)]"
    for i in range(60)
)
ANSWER = f"Here it is.\n\n```python\n{SOURCE}\n\ndef relu__default_kernel_impl(x):\n    return x\n```\n"
CASE = "((T([64, 128], f16), [1, 0]), {'dim': 1, 'keepdim': True})"


class Litter:
    def __del__(self) -> None:
        sum(range(30))  # Python code in a finalizer: the GIL may change hands here


def main(mode: str, seconds: float) -> None:
    if mode == "raw":
        jobs = [lambda: ast.parse(SOURCE)]
    else:
        from agent.extract import extract_candidate
        from agent.providers.builtin.codegen import launched_jit_kernels
        from evaluator.cases.testcase import parse_case

        jobs = [
            lambda: extract_candidate(ANSWER, "relu.default"),
            lambda: parse_case(CASE),
            lambda: launched_jit_kernels(SOURCE),
        ]
    stop = threading.Event()
    errors: list[str] = []
    parses = [0]

    def parser(k: int) -> None:
        job = jobs[k % len(jobs)]
        for _ in range(PARSES_PER_WAVE):
            if stop.is_set():
                return
            for _ in range(LITTER_PER_PARSE):
                a, b = Litter(), Litter()
                a.other, b.other = b, a  # a cycle: only the collector frees it, running __del__
            try:
                job()
            except SystemError as exc:
                errors.append(str(exc))
                stop.set()
            parses[0] += 1

    sys.setswitchinterval(1e-6)
    gc.set_threshold(5, 1, 1)
    started = time.monotonic()
    deadline = started + seconds
    # Waves of fresh threads: the race shows most while threads start and stop beside each other.
    while not stop.is_set() and time.monotonic() < deadline:
        wave = [threading.Thread(target=parser, args=(k,)) for k in range(NUM_PARSERS)]
        for t in wave:
            t.start()
        for t in wave:
            t.join()
    stop.set()
    took = round(time.monotonic() - started, 2)
    print(json.dumps({"errors": errors[:3], "parses": parses[0], "seconds": took}))


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
