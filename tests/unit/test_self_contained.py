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
