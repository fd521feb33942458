"""Output samples in README.md and docs/ are excerpts of real runs, checked by tests.

A sample is a fenced block right after a marker naming its scenario:

    <!-- sample: ab-regression -->
    ```
    vector_add: A/B regressed against HEAD ...
    ```

An output only a GPU run can give (the H100 bisection in docs/ci.md) is marked
`<!-- recorded: docs/measurements/<file>.json -->` instead, naming the committed run it came
from. The test that owns the scenario (SCENARIOS) runs it on the simulated device (or with the
real compilers), cuts the excerpt the docs show and calls `check_sample`: when the wording of
the output changes, the test fails until the docs follow. One command rewrites every sample
from real runs instead of failing:

    GPUPERF_UPDATE_DOC_SAMPLES=1 python -m pytest -p no:cacheprovider \\
        tests/plugin/test_doc_samples.py tests/install/test_bare_machine.py \\
        tests/plugin/test_static_gate.py

Volatile parts (wall times, clock times of day, temporary paths, commit ids, the digits after
a decimal point, test counts that grow with the suite, a machine's library paths) are
normalised on both sides before comparing, so the docs keep the values of the run that wrote
them while every word, unit and whole number is checked.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UPDATE_VARIABLE = "GPUPERF_UPDATE_DOC_SAMPLES"
REGENERATE = (
    f"{UPDATE_VARIABLE}=1 python -m pytest -p no:cacheprovider "
    "tests/plugin/test_doc_samples.py tests/install/test_bare_machine.py "
    "tests/plugin/test_static_gate.py"
)
MARKER = re.compile(r"^<!-- sample: (?P<name>[\w-]+) -->\n```\n(?P<body>.*?)^```$", re.M | re.S)

# Every scenario a document may name, and the test module that produces it.
SCENARIOS = {
    "ab-regression": "tests/plugin/test_doc_samples.py",
    "stored-regression": "tests/plugin/test_doc_samples.py",
    "require-missing": "tests/plugin/test_doc_samples.py",
    "accept-failure": "tests/plugin/test_doc_samples.py",
    "accept-passed": "tests/plugin/test_doc_samples.py",
    "skip-summary": "tests/install/test_bare_machine.py",
    "static-table": "tests/plugin/test_static_gate.py",
    "static-failure": "tests/plugin/test_static_gate.py",
}


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def find_sample(name: str) -> tuple[Path, str]:
    """The document holding sample `name` and its text (exactly one per name)."""
    found = [
        (path, match["body"])
        for path in documents()
        for match in MARKER.finditer(path.read_text(encoding="utf-8"))
        if match["name"] == name
    ]
    assert len(found) == 1, f"sample {name!r} is marked {len(found)} times in the docs"
    return found[0]


def normalise_common(text: str) -> str:
    """What changes from run to run and machine to machine, whatever the scenario."""
    text = re.sub(r"\d\d:\d\d:\d\d\.\d{3}", "HH:MM:SS.mmm", text)  # clock times of day
    text = re.sub(r"\b\d+(\.\d+)?s\b(?= =+$)", "T s", text, flags=re.M)  # "in 0.30s ===="
    text = re.sub(r"(held|waited) \d+\.\d+ s", r"\1 T s", text)  # GPU-lock wall times
    text = re.sub(r"/tmp/\S*?(?=[/\s)\]]|$)", "<tmp>", text)
    text = re.sub(r"\b[0-9a-f]{12}\b", "<commit>", text)  # a commit of the test's own files
    # The simulated device's figures past the decimal point can move with NumPy's and SciPy's
    # releases (CI runs the oldest and the newest): the words, the units and the whole
    # numbers (pairs, loads, samples, saves) are what a sample pins.
    text = re.sub(r"(\d)\.\d+", r"\1.#", text)
    return text.rstrip("\n") + "\n"


def check_sample(name: str, produced: str, normalise: Callable[[str], str] = str) -> None:
    """Compare the docs' sample `name` with what a run `produced` (both normalised), or
    rewrite the sample when GPUPERF_UPDATE_DOC_SAMPLES=1."""
    produced = produced.rstrip("\n") + "\n"
    path, documented = find_sample(name)
    if os.environ.get(UPDATE_VARIABLE) == "1":
        text = path.read_text(encoding="utf-8")
        marker = f"<!-- sample: {name} -->\n```\n"
        start = text.index(marker) + len(marker)
        end = text.index("```", start)
        path.write_text(text[:start] + produced + text[end:], encoding="utf-8")
        return
    want, got = (normalise_common(normalise(t)) for t in (documented, produced))
    if want != got:
        diff = "\n".join(
            difflib.unified_diff(
                want.splitlines(), got.splitlines(), "the docs", "this run", lineterm=""
            )
        )
        raise AssertionError(
            f"{path.relative_to(ROOT)}: sample {name!r} no longer matches the output "
            f"(regenerate: {REGENERATE}):\n{diff}"
        )


def excerpt(output: str, first: str, last: str | None = None) -> str:
    """The lines of `output` from the first that starts with `first` through the first after
    it that starts with `last` (or that line alone)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    if last is None:
        return lines[start] + "\n"
    end = next(i for i in range(start, len(lines)) if lines[i].startswith(last))
    return "\n".join(lines[start : end + 1]) + "\n"


def section_code(path: Path, heading: str, language: str) -> str:
    """The first ```language block of the section `heading` (a line of `path`, up to the next
    heading of its level or above): a worked example that tests run as the docs show it."""
    text = path.read_text(encoding="utf-8")
    level = heading.split(" ", 1)[0]
    section = text[text.index(f"\n{heading}\n") :]
    ends = [section.find(f"\n{'#' * n} ", 1) for n in range(1, len(level) + 1)]
    section = section[: min((end for end in ends if end > 0), default=len(section))]
    found = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert found, f"{path.name}: no {language} block under {heading!r}"
    return found.group(1)
