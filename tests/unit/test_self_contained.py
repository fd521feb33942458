"""The product stands alone: its code and docs cite public sources, never files that are not
in this repository (the design notes and source documents it was written from)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRIVATE = ("DESIGN.md", "STYLE.md", "seeds/")


def shipped_files() -> list[Path]:
    roots = [REPO / "pytest_gpuperf", REPO / "docs", REPO / "kernels", REPO / "baselines"]
    files = [REPO / "README.md"]
    for root in roots:
        files += [
            p
            for p in root.rglob("*")
            if p.is_file() and p.suffix in {".py", ".md", ".hip", ".h", ".toml", ".rst", ".txt"}
        ]
    return files


@pytest.mark.parametrize("name", PRIVATE)
def test_nothing_cites_a_document_outside_the_repository(name):
    hits = [
        f"{path.relative_to(REPO)}:{number}"
        for path in shipped_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if name in line
    ]
    assert hits == []


def test_every_test_the_docs_name_exists():
    """docs/reliability.md names the test that keeps each row true, other docs name tests as
    `path::name`: a renamed or deleted test must not leave a reference pointing at nothing.
    (Other docs also show example layouts of a user's project, not checked.)"""
    import re

    missing = []
    reference = re.compile(r"(tests/[\w/]+\.py)((?:::\w+)?)((?:, ::\w+)*)")
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for match in reference.finditer(doc.read_text()):
            if doc.name != "reliability.md" and not match.group(2):
                continue
            path = REPO / match.group(1)
            if not path.exists():
                missing.append(f"{doc.name}: {match.group(1)}")
                continue
            names = [match.group(2)[2:]] if match.group(2) else []
            names += [part.strip()[2:] for part in match.group(3).split(",") if part.strip()]
            text = path.read_text()
            missing += [f"{doc.name}: {path.name}::{n}" for n in names if f"def {n}(" not in text]
    assert not missing
