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
from dataclasses import dataclass
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


# -- python blocks that run as tests ----------------------------------------------------------
#
# A page whose python blocks are each a test module (docs/triton-pytorch.md) states what each
# test does in comments: `print(x)  # LINE` (or `print(x)` followed by comment lines that make
# LINE) is a line the test prints, `# fails: LINE` a test that fails with LINE. `…` in a LINE
# stands for a run's numbers; every other character is checked as written.

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)
TEST_FUNCTION = re.compile(r"^def (test_\w+)\(", re.M)
FAILS = "# fails: "


@dataclass(frozen=True)
class SampleTest:
    """One test function of a python block and what the page says it does."""

    name: str
    prints: tuple[str, ...]  # lines it prints, each somewhere in its captured output
    fails: str | None  # the line it fails with (None: it passes)


def python_blocks(path: Path) -> list[str]:
    """Every ```python block of `path`, in order."""
    return [match.group(1) for match in PYTHON_BLOCK.finditer(path.read_text(encoding="utf-8"))]


def sample_tests(block: str) -> list[SampleTest]:
    """The test functions of `block` with their expected prints and failure; a `print` that
    says nothing of what it prints is an error here (the page must say it)."""
    starts = [match.start() for match in TEST_FUNCTION.finditer(block)]
    tests = []
    for start, end in zip(starts, [*starts[1:], len(block)], strict=True):
        body = block[start:end].splitlines()
        name = TEST_FUNCTION.match(body[0])
        assert name, body[0]
        prints, fails = [], None
        for position, line in enumerate(body):
            stripped = line.strip()
            if stripped.startswith(FAILS):
                fails = stripped[len(FAILS) :]
            if not stripped.startswith("print("):
                continue
            said = stripped.split("  # ", 1)[1] if "  # " in stripped else ""
            following = []
            for after in body[position + 1 :]:
                if not after.strip().startswith("#") or after.strip().startswith(FAILS):
                    break
                following.append(after.strip()[1:].strip())
            said = " ".join([said, *following]).strip()
            assert said, f"{name[1]}: {stripped!r} does not say what it prints"
            prints.append(said)
        tests.append(SampleTest(name[1], tuple(prints), fails))
    return tests


def block_runner(block: str) -> str | None:
    """Where a block can run: "sim" (no GPU library: the simulated device), "torch" (torch
    and Triton on a GPU), "cupy" (CuPy on a GPU); None for a mix no test provides."""
    imported = set(re.findall(r"^(?:import|from) (\w+)", block, re.M))
    needs = imported & {"torch", "triton", "cupy"}
    if not needs:
        return "sim"
    if needs <= {"torch", "triton"}:
        return "torch"
    return "cupy" if needs == {"cupy"} else None


def line_pattern(line: str) -> re.Pattern[str]:
    """A documented line as a pattern: `…` matches a run's numbers (anything on one line)."""
    return re.compile("[^\n]+?".join(re.escape(part) for part in line.split("…")))


def per_test_sections(output: str) -> dict[str, str]:
    """A pytest output's per-test sections (its failures, and with -rP its passes' captured
    output), keyed by test name."""
    sections: dict[str, str] = {}
    name = None
    for line in output.splitlines():
        header = re.fullmatch(r"_{3,} (\S+) _{3,}", line)
        if header:
            name = header[1]
            sections.setdefault(name, "")
        elif re.match(r"={3,} ", line):
            name = None
        elif name is not None:
            sections[name] += line + "\n"
    return sections


def sample_problems(tests: list[SampleTest], outcomes: dict[str, tuple[str, str]], output: str):
    """What differs between what the page says of `tests` and a run: `outcomes` maps a test
    name to its (outcome, error line) from the JSON report, `output` is pytest's with -rA."""
    sections = per_test_sections(output)
    problems = []
    for test in tests:
        outcome, error = outcomes.get(test.name, ("not run", ""))
        want = "failed" if test.fails else "passed"
        if outcome != want:
            problems.append(f"{test.name}: {outcome}, the page says {want} ({error})")
        elif test.fails and not line_pattern(test.fails).search(error):
            problems.append(f"{test.name}: failed with {error!r}, not {test.fails!r}")
        for line in test.prints:
            pattern = line_pattern(line)
            printed = sections.get(test.name, "").splitlines()
            if not any(pattern.fullmatch(text) for text in printed):
                problems.append(f"{test.name}: printed no line {line!r}")
    return problems
