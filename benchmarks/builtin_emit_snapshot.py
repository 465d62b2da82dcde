"""Render every kernel file the builtin writer emits for the smoke and torchbench suites, and store
or check a snapshot of them (the guard that moving kernel source around changes no emitted byte).

    python benchmarks/builtin_emit_snapshot.py            # check against the stored snapshot
    python benchmarks/builtin_emit_snapshot.py --write    # store a new snapshot
    python benchmarks/builtin_emit_snapshot.py --family softmax   # check one family's files
    python benchmarks/builtin_emit_snapshot.py --code-only   # compare code, not comments/docstrings

Requests: for each operator of both suites, variants 0-3 with (a) all its cases, (b) the ten
cases the agent gets by default, (c) each of its first three ranked cases alone (writers
specialise on single shapes). The snapshot, tests/fixtures/builtin_emitted.json.xz, keeps the
sha256 of each rendered file (or null where the writer declines) and every distinct text (xz
compresses the near-identical files to ~150 KB).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import lzma
import sys
from collections.abc import Iterator
from pathlib import Path

SNAPSHOT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "builtin_emitted.json.xz"
SUITES = ("smoke", "torchbench")
VARIANTS = (0, 1, 2, 3)
SINGLE_CASES = 3


def requests() -> Iterator[tuple[str, object]]:
    """(key, KernelRequest) for every request the snapshot covers, in a fixed order."""
    from agent.providers.builtin.request import KernelRequest
    from evaluator.cases.suites import select_operators

    for suite in SUITES:
        everything = {oc.op: oc.cases for oc in select_operators(suite, max_cases_per_op=10**6).ops}
        default = {oc.op: oc.cases for oc in select_operators(suite).ops}
        for op in sorted(everything):
            sets = {"all": everything[op], "top10": default[op]}
            for i, case in enumerate(default[op][:SINGLE_CASES]):
                sets[f"case{i}"] = [case]
            for name, cases in sets.items():
                for variant in VARIANTS:
                    key = f"{suite}/{op}/{name}/v{variant}"
                    yield key, KernelRequest(op=op, schema="", cases=list(cases), variant=variant)


def render_all(families: set[str] | None = None) -> tuple[dict[str, str | None], dict[str, str]]:
    """(key -> sha256 or None, sha256 -> text) for every request (of `families` only if given)."""
    from agent.providers.builtin.registry import FAMILY_OF, WRITERS

    digests: dict[str, str | None] = {}
    texts: dict[str, str] = {}
    for key, request in requests():
        if families is not None and FAMILY_OF.get(request.op) not in families:
            continue
        writer = WRITERS.get(request.op)
        text = writer(request) if writer is not None else None
        if text is None:
            digests[key] = None
            continue
        digest = hashlib.sha256(text.encode()).hexdigest()
        digests[key] = digest
        texts.setdefault(digest, text)
    return digests, texts


def code_of(text: str) -> str:
    """The file's syntax tree without docstrings: equal for files that differ only in comments,
    docstrings and layout (run --code-only before storing a snapshot after such an edit)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def load(path: Path = SNAPSHOT) -> dict:
    with lzma.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="store a new snapshot")
    ap.add_argument("--code-only", action="store_true", help="compare code only (see code_of)")
    ap.add_argument("--family", action="append", help="check only this family (repeatable)")
    args = ap.parse_args()
    if args.write and args.family:
        ap.error("--write stores the whole snapshot: drop --family")
    families = set(args.family) if args.family else None
    digests, texts = render_all(families)
    if args.write:
        data = {"digests": digests, "texts": texts}
        with lzma.open(SNAPSHOT, "wt", encoding="utf-8", preset=9) as f:
            json.dump(data, f, sort_keys=True)
        print(f"wrote {len(digests)} requests, {len(texts)} distinct files to {SNAPSHOT}")
        return
    snapshot = load()
    stored = {k: v for k, v in snapshot["digests"].items() if families is None or k in digests}
    if args.code_only:
        old_texts = snapshot["texts"]
        stored = {k: v and code_of(old_texts[v]) for k, v in stored.items()}
        digests = {k: v and code_of(texts[v]) for k, v in digests.items()}
    changed = sorted(k for k in stored.keys() | digests.keys() if stored.get(k) != digests.get(k))
    print(f"{len(digests)} requests, {len(changed)} differ from the snapshot")
    for key in changed[:20]:
        print(f"  {key}")
    sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
