"""The repository holds what the docs quote, not raw runs: bench/ holds scripts only, each
machine-readable run kept in docs/measurements/ is small and cited, and every raw run a doc
names (`raw-runs/FILE`, a file of the release asset) has its row in docs/benchmarks.md, "Raw
runs": date, card, board and the command that makes it again."""

from __future__ import annotations

import fnmatch
import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
MAX_KEPT_BYTES = 50_000
CITED = re.compile(r"raw-runs/([a-z{][\w.{},*-]*)")  # FILE: a placeholder


def _expand(pattern: str) -> list[str]:
    """'a-{b,c}-{d,e}.json' -> the four names (shell brace expansion, no nesting)."""
    parts = re.split(r"\{([^{}]*)\}", pattern)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(combination) for combination in itertools.product(*choices)]


def _raw_runs_table(text: str) -> list[str]:
    """The files the "Raw runs" table lists (its first column's full names)."""
    section = text.split("\n## Raw runs\n", 1)[1].split("\n## ", 1)[0]
    names = []
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            for token in re.findall(r"`([^`]+)`", first):
                if re.match(r"[a-z]", token):
                    names += _expand(token.rstrip("/"))
    return names


def _cited_raw_runs() -> dict[str, str]:
    cited = {}
    for path in [REPO / "README.md", *sorted(DOCS.glob("*.md"))]:
        for match in CITED.finditer(path.read_text()):
            for name in _expand(match[1].rstrip(".,;:)")):
                cited[name.rstrip("/")] = path.name
    return cited


def test_every_raw_run_a_doc_cites_has_its_row_in_benchmarks_md():
    listed = _raw_runs_table((DOCS / "benchmarks.md").read_text())
    assert len(listed) > 20
    missing = {
        name: doc
        for name, doc in _cited_raw_runs().items()
        if not any(fnmatch.fnmatch(row, name) or row.startswith(name) for row in listed)
    }
    assert not missing, f"raw runs cited but not in docs/benchmarks.md, 'Raw runs': {missing}"


def test_the_table_finds_a_missing_row():
    """The check above can fail: a name the table does not list is reported."""
    listed = _raw_runs_table("# B\n\n## Raw runs\n\n| `a-{x,y}.json` | s |\n\n## Next\n")
    assert listed == ["a-x.json", "a-y.json"]
    assert not any(fnmatch.fnmatch(row, "a-z.json") for row in listed)
    assert _expand("p-{1,2}-{a,b}.txt") == ["p-1-a.txt", "p-1-b.txt", "p-2-a.txt", "p-2-b.txt"]


def test_kept_measurements_are_small_and_cited():
    if not (DOCS / "measurements").is_dir():
        pytest.skip("docs/measurements is not here (an sdist ships no bench data)")
    texts = "".join(p.read_text() for p in [REPO / "README.md", *DOCS.glob("*.md")])
    kept = sorted(p for p in (DOCS / "measurements").rglob("*") if p.is_file())
    assert kept
    for path in kept:
        assert path.stat().st_size <= MAX_KEPT_BYTES, f"{path}: a raw run (see 'Raw runs')"
        assert f"docs/measurements/{path.name}" in texts, f"{path.name}: cited by no doc"


def test_bench_holds_scripts_not_runs():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (an sdist ships no bench data)")
    tracked = subprocess.run(
        ["git", "ls-files", "bench"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked
    runs = [name for name in tracked if not name.endswith((".py", ".sh"))]
    assert not runs, f"raw runs belong in a CI artifact or release asset: {runs}"
