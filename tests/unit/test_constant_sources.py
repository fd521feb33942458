"""The gate's constants keep their value and one line on where it comes from; the measurements
behind them (dates, boards, before and after) live in docs/benchmarks.md, "Where the gate's
constants come from", which every such line names by its anchor."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "pytest_gpuperf"
BENCHMARKS = REPO / "docs" / "benchmarks.md"
ANCHOR = re.compile(r"docs/benchmarks\.md#([\w-]+)")
# Modules whose comments read as a lab notebook before the measurements moved to the docs.
POLICY_MODULES = ("gate/policy.py", "engine/policy.py", "gate/pairing.py")
LAB_NOTE = re.compile(r"GPU-[0-9a-f]{8}|\b20\d\d-\d\d-\d\d\b|\bbefore:|raw-runs/|bench/measured")


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    return {slug(m[1]) for m in re.finditer(r"^#+ (.+)$", markdown, re.M)}


def test_slug_follows_github():
    assert slug("Tolerance and A/B threshold") == "tolerance-and-ab-threshold"
    assert slug("Where the gate's constants come from") == "where-the-gates-constants-come-from"
    assert "code-object-spread" in anchors("# T\n\n### Code-object spread\n")


def test_every_anchor_the_code_names_is_a_heading_of_benchmarks_md():
    known = anchors(BENCHMARKS.read_text())
    cited = {
        (path.relative_to(REPO).as_posix(), name)
        for path in PACKAGE.rglob("*.py")
        for name in ANCHOR.findall(path.read_text())
    }
    assert len(cited) >= 7
    missing = sorted(c for c in cited if c[1] not in known)
    assert not missing, f"anchors with no heading in docs/benchmarks.md: {missing}"


def test_the_policy_modules_comments_hold_no_lab_notes():
    notes = []
    for name in POLICY_MODULES:
        for number, line in enumerate((PACKAGE / name).read_text().splitlines(), 1):
            comment = line.split("#", 1)[1] if "#" in line else ""
            if LAB_NOTE.search(comment):
                notes.append(f"{name}:{number}: {line.strip()}")
    assert not notes, "measured facts belong in docs/benchmarks.md:\n" + "\n".join(notes)


def test_gate_policy_is_code_more_than_comments():
    lines = [line.strip() for line in (PACKAGE / "gate" / "policy.py").read_text().splitlines()]
    comments = sum(line.startswith("#") for line in lines)
    code = sum(bool(line) and not line.startswith("#") for line in lines)
    assert comments < 0.35 * (comments + code), (comments, code)
