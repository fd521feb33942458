"""The source distribution ships the package, its docs and its tests, not bench data: built
here with hatchling's own builder from [tool.hatch.build.targets.sdist] in pyproject.toml, as
`python -m build --sdist` builds it (0.5 s)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# A guard against bench data coming back, with room for the package to grow a little. What
# the sdist holds is the package, the docs' Markdown and the tests (1.10 MB today); under
# 1 MB needs them smaller (issue 47), not more left out.
MAX_SDIST_BYTES = 1_150_000
BENCH_DATA = ("docs/measurements/", "docs/img/")


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> tuple[int, list[str]]:
    builders = pytest.importorskip(
        "hatchling.builders.sdist", reason="hatchling (the [test] extra) is not installed"
    )
    out = tmp_path_factory.mktemp("sdist")
    (path,) = builders.SdistBuilder(str(REPO)).build(directory=str(out))
    with tarfile.open(path) as archive:
        names = [m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile()]
    return Path(path).stat().st_size, names


def test_the_sdist_is_small(sdist):
    size, _ = sdist
    assert size < MAX_SDIST_BYTES, f"{size:,} bytes: what is new in it (tar tzvf)?"


def test_the_sdist_ships_the_package_docs_and_tests(sdist):
    _, names = sdist
    for shipped in (
        "pyproject.toml",
        "README.md",
        "pytest_gpuperf/__init__.py",
        "pytest_gpuperf/gate/static/include/hip/hip_runtime.h",
        "docs/architecture.md",
        "kernels/gpuperf.h",
        "tests/unit/test_sdist.py",
        "tests/plugin/conftest.py",
    ):
        assert shipped in names, shipped


def test_the_sdist_ships_no_bench_data(sdist):
    _, names = sdist
    data = [name for name in names if name.startswith(BENCH_DATA)]
    assert not data, f"bench data in the sdist: {data}"
    bench = [name for name in names if name.startswith("bench/")]
    assert all(name.endswith(".py") for name in bench), bench
    # bench/ only for the scripts the shipped tests load to make their inputs, and none of
    # the tests of the bench scripts' own analysis (they need the scripts left out)
    assert len(bench) <= 6, bench
    assert not [n for n in names if n.startswith("tests/") and n.endswith("_bench.py")]
