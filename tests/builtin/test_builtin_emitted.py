"""The builtin writer emits exactly the files of the stored snapshot, for every smoke and
torchbench operator, variants 0-3 and several case sets (benchmarks/builtin_emit_snapshot.py).

Moving kernel source into real modules must not change one emitted byte. When a change to the
emitted text is intended, store a new snapshot with `python benchmarks/builtin_emit_snapshot.py
--write` in the same commit and say why in its message.
"""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "builtin_emit_snapshot.py"


def _snapshot_module():
    spec = importlib.util.spec_from_file_location("builtin_emit_snapshot", _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_emitted_files_match_the_snapshot() -> None:
    snap = _snapshot_module()
    stored = snap.load()
    digests, texts = snap.render_all()
    assert digests.keys() == stored["digests"].keys()
    changed = [k for k in digests if digests[k] != stored["digests"][k]]
    if changed:
        key = changed[0]
        old = stored["texts"].get(stored["digests"][key] or "", "<declined>\n")
        new = texts.get(digests[key] or "", "<declined>\n")
        diff = "".join(
            list(
                difflib.unified_diff(old.splitlines(True), new.splitlines(True), "snapshot", "now")
            )[:80]
        )
        pytest.fail(f"{len(changed)} emitted files changed, first {key}:\n{diff}")


def test_snapshot_covers_every_family() -> None:
    from agent.providers.builtin.registry import FAMILIES, FAMILY_OF

    stored = _snapshot_module().load()["digests"]
    written_ops = {key.split("/")[1] for key, digest in stored.items() if digest}
    assert {FAMILY_OF[op] for op in written_ops} == set(FAMILIES)
