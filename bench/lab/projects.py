"""Throwaway git projects: the user's repository a script's pytest processes run in, its
base committed and, where a script says so, its head left in the work tree as a pull
request's checkout shows it to --gpuperf-compare; or a real library's releases vendored one
commit after another, each with a test of the real-ops corpus (tests/gpu/real_ops/).

Nothing of another project is ever committed to this one: the projects are made under a
temporary folder at run time."""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path

from lab import REPO_ROOT
from tests.git_repo import git

CORPUS = REPO_ROOT / "tests" / "gpu" / "real_ops"
# A corpus project's pytest.ini: the vendored release first on sys.path, the CUDA GPU
# required (no silent fall-back to the simulated device), baselines kept in the project.
CORPUS_INI = """\
[pytest]
pythonpath = vendor
addopts = -p no:cacheprovider
gpuperf_backend = cuda
gpuperf_require = cuda
gpuperf_budget = {budget_s:g}
gpuperf_baseline_dir = baselines
markers =
    gpu: needs a real GPU (skipped without one)
"""


def commit_all(directory: Path, message: str) -> str:
    """Commit the whole work tree (making `directory` a repository first); the commit's hash.
    A commit even when nothing changed: two releases with the same files still make two
    revisions, and the A/B then says so."""
    if not (directory / ".git").exists():
        directory.mkdir(parents=True, exist_ok=True)
        git(directory, "init", "-q")
    git(directory, "add", "-A")
    git(directory, "commit", "-q", "--allow-empty", "-m", message)
    return git(directory, "rev-parse", "HEAD")


def write_files(directory: Path, files: Mapping[str, str]) -> None:
    """Each {relative path: text} of `files` under `directory` (folders made as needed)."""
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def write_project(directory: Path, files: Mapping[str, str], message: str) -> str:
    """A new git project of `files` (and a pytest.ini, so that it is pytest's rootdir),
    committed as `message`; returns the commit's hash."""
    directory.mkdir(parents=True)
    write_files(directory, {"pytest.ini": "[pytest]\n", **files})
    return commit_all(directory, message)


def corpus_project(root: Path, test_file: Path, budget_s: float) -> None:
    """The corpus's conftest, one of its test files and the pytest.ini, at `root`'s top."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text(CORPUS_INI.format(budget_s=budget_s))
    shutil.copyfile(CORPUS / "conftest.py", root / "conftest.py")
    shutil.copyfile(test_file, root / test_file.name)


def vendor(source: Path, package: str, root: Path) -> None:
    """Put release `source` of `package` at root/vendor/<package>, replacing what was there.
    `source` is a wheel (its `package/` members), a folder holding `package/` (an unpacked
    wheel, a `src/` tree), or the package folder itself. A source without the package ends
    the script with one line."""
    target = root / "vendor" / package
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_file() and source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            members = [m for m in wheel.namelist() if m.startswith(f"{package}/")]
            if not members:
                raise SystemExit(f"{source}: a wheel without {package}/")
            wheel.extractall(target.parent, members)
        return
    for candidate in (source / package, source / "src" / package, source):
        if (candidate / "__init__.py").is_file() and candidate.name == package:
            shutil.copytree(candidate, target, ignore=shutil.ignore_patterns("__pycache__"))
            return
    raise SystemExit(f"{source}: neither a wheel nor a folder holding {package}/__init__.py")


def release_name(source: Path, package: str) -> str:
    """What a commit message calls release `source`: the wheel's name, the version its
    unpacked folder's dist-info names, or the folder's name."""
    if source.is_file():
        return source.name
    found = sorted(source.glob(f"{package}-*.dist-info"))
    return found[0].name.removesuffix(".dist-info") if found else source.name
