"""The options table of docs/writing-perf-tests.md lists exactly the options the plugin has,
with their ini keys: documentation that drifts from `--help` misleads (a help text once said
the tolerance applies "on top of" the noise while the rule was the larger of the two)."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_gpuperf.config.options import OPTIONS
from pytest_gpuperf.gate.policy import DEFAULT_COMPARE_THRESHOLD, DEFAULT_TOLERANCE

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-perf-tests.md"


def doc_rows() -> dict[str, str]:
    rows = {}
    for line in DOC.read_text().splitlines():
        match = re.match(r"\| `(--[a-z-]+)(?:=[A-Z/]+)?` \| (`[a-z_]+`|—) \|", line)
        if match:
            rows[match.group(1)] = match.group(2).strip("`")
    return rows


def test_every_option_is_documented_with_its_ini_key():
    documented = doc_rows()
    assert set(documented) == {spec.flag for spec in OPTIONS}
    for spec in OPTIONS:
        assert documented[spec.flag] == (spec.ini or "—"), spec.flag


def test_help_texts_state_the_defaults_in_force():
    helps = {spec.flag: spec.help for spec in OPTIONS}
    assert f"Default: {DEFAULT_TOLERANCE}" in helps["--gpuperf-tolerance"]
    assert (
        "larger of" in helps["--gpuperf-tolerance"]
        and "on top of" not in helps["--gpuperf-tolerance"]
    )
    assert f"Default: {DEFAULT_COMPARE_THRESHOLD}" in helps["--gpuperf-compare-threshold"]
    assert "-sim.toml" in helps["--gpuperf-save"]
    for spec in OPTIONS:
        assert "Default" in spec.help or "default" in spec.help or spec.is_flag, spec.flag


ROOT = DOC.parents[1]


def mentioned_flags(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--(?:no-)?gpuperf(?:-[a-z]+)*)", text))


def test_every_flag_the_docs_and_the_workflow_use_exists():
    """A recipe in docs/ci.md or the workflow that names a renamed option breaks a user's CI."""
    known = {spec.flag for spec in OPTIONS}
    places = [ROOT / "README.md"]
    workflow = ROOT / ".github" / "workflows" / "gpuperf.yml"
    if workflow.is_file() or (ROOT / ".git").exists():  # an sdist ships no .github/
        places.append(workflow)
    places += sorted((ROOT / "docs").glob("*.md"))
    unknown = {
        f"{path.relative_to(ROOT)}: {flag}"
        for path in places
        for flag in mentioned_flags(path.read_text())
        if flag not in known
    }
    assert not unknown


def test_the_flag_finder_sees_flags_in_prose_and_commands():
    assert mentioned_flags("run `pytest --gpuperf-save` or --no-gpuperf, not --gpuperf-nope=1") == {
        "--gpuperf-save",
        "--no-gpuperf",
        "--gpuperf-nope",
    }
