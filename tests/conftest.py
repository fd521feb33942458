"""Fixtures for tests that need an optional toolchain, and a skip summary by reason.

tests/toolchains.py says which toolchains are optional and how a missing one skips (or fails,
under GPUPERF_REQUIRE_TOOLCHAINS=1, as in CI).
"""

from __future__ import annotations

import shutil

import pytest

from tests.toolchains import REQUIRE_VARIABLE, TOOLCHAINS, need, probe_system


def pytest_sessionstart(session: pytest.Session) -> None:
    probe_system()


@pytest.fixture(scope="session")
def clang19() -> str:
    """The path of clang-19 (Debian's, which emits real gfx942 assembly)."""
    need("clang-19")
    path = shutil.which("clang-19")
    assert path is not None
    return path


@pytest.fixture(scope="session")
def nvrtc() -> None:
    """NVRTC from the [cuda] extra (cuda-bindings and nvidia-cuda-nvrtc) compiles here."""
    need("nvrtc")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """One line per skip reason: a machine without clang-19 or ROCm skips dozens of tests in
    several files for the same reason, which pytest's own -rs lists once per file and line."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            reason = str(longrepr[2]).removeprefix("Skipped: ")
            reasons[reason] = reasons.get(reason, 0) + 1
    if not reasons:
        return
    terminalreporter.section("skipped, by reason", sep="-")
    for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
        terminalreporter.write_line(f"{count:5d} {reason}")
    prefixes = tuple(f"needs {toolchain.what}:" for toolchain in TOOLCHAINS.values())
    if any(reason.startswith(prefixes) for reason in reasons):
        terminalreporter.write_line(
            f"CI sets {REQUIRE_VARIABLE}=1: there a missing compiler or library fails the test"
        )
