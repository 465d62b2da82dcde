"""The performance record: docs/PERFORMANCE.md stays a short current-state document, and every
`docs/<name>.md` path that the code and docs name exists (the dated notebook lives in docs/history/)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_DOC_PATH = re.compile(r"docs/[A-Za-z0-9_./-]+?\.md")
_SCANNED = ("README.md", "docs", "agent", "evaluator", "benchmarks", "configs", "tests")


def _skipped(path: Path) -> bool:
    """The notebook itself."""
    rel = path.relative_to(ROOT).as_posix()
    return rel.startswith("docs/history/")


def _texts() -> list[tuple[Path, str]]:
    out = []
    for top in _SCANNED:
        path = ROOT / top
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        for f in files:
            if f.is_file() and f.suffix in {".md", ".py", ".sh", ".toml"} and not _skipped(f):
                out.append((f, f.read_text(encoding="utf-8", errors="replace")))
    return out


def test_performance_doc_is_short_and_states_the_current_results() -> None:
    text = (ROOT / "docs" / "PERFORMANCE.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    for heading in ("## Current state", "## Method", "## Ideas kept", "## Ideas dropped"):
        assert heading in text


def test_every_named_doc_path_exists() -> None:
    missing = sorted(
        {
            f"{f.relative_to(ROOT)}: {m}"
            for f, text in _texts()
            for m in _DOC_PATH.findall(text)
            if not (ROOT / m).is_file()
        }
    )
    assert not missing, "docs named but absent:\n" + "\n".join(missing)


_HISTORY_REFERENCE = re.compile(r"design §\d|\bissues? #?\d+\b|\bBENCHMARKS §", re.IGNORECASE)
_CODE_FOLDERS = ("agent", "evaluator", "benchmarks", "tests", "configs", "prompts")


def test_code_cites_no_issue_numbers_or_design_sections() -> None:
    """Comments give today's reasons; the history of a choice lives in docs/history/."""
    hits = []
    for top in _CODE_FOLDERS:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in {".py", ".sh", ".toml", ".j2"} or _skipped(path):
                continue
            if "fixtures" in path.parts:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if _HISTORY_REFERENCE.search(line):
                    hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not hits, "\n".join(hits)
