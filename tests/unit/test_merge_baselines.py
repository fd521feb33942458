"""Merging the baselines the shards of one run saved (baseline/merge.py): three-way against
--out's files, a continued history wins, anything else is a conflict named by file:line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.baseline.merge import extends, plan_merge, write_merge
from pytest_gpuperf.baseline.model import BaselineEntry, SaveRecord
from pytest_gpuperf.commands.merge.__main__ import main
from pytest_gpuperf.errors import BaselineError, ConfigError

DEVICE = "mi300x"
REPO = Path(__file__).resolve().parents[2]


def _save(efficiency: float, when: str, fingerprint: str = "sha256:a") -> SaveRecord:
    return SaveRecord(
        efficiency=efficiency,
        efficiency_ci=(efficiency * 0.99, efficiency * 1.01),
        time_s=1e-4,
        when=when,
        fingerprint=fingerprint,
        samples=10,
    )


def _entry(test_id: str, *saves: SaveRecord, source: str = "measured") -> BaselineEntry:
    return BaselineEntry(
        test_id=test_id,
        name="k",
        cache="cold",
        efficiency=saves[-1].efficiency if saves else 0.8,
        efficiency_ci=(0.79, 0.81),
        run_spread=0.07,
        bandwidth_bps=4e12,
        time_s=1e-4,
        bytes_moved=1 << 20,
        source=source,
        saves=saves,
        reported_in="a blog post" if source == "reported" else "",
    )


S1 = _save(0.80, "2026-11-01T00:00:00Z")
S2 = _save(0.81, "2026-11-02T00:00:00Z")
S3 = _save(0.79, "2026-11-03T00:00:00Z")
A, B, C = "t.py::test_a", "t.py::test_b", "t.py::test_c"


def _dir(path: Path, *entries: BaselineEntry) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if entries:
        BaselineStore(path).save(DEVICE, entries)
    return path


def _entries(path: Path) -> dict:
    return dict(BaselineStore(path).load(DEVICE).entries)


@pytest.fixture
def base(tmp_path):
    return _dir(tmp_path / "base", _entry(A, S1), _entry(B, S1), _entry(C, S1))


def _shard(tmp_path, base, name, *changed: BaselineEntry, remove=()):
    path = tmp_path / name
    shutil.copytree(base, path)
    store = BaselineStore(path)
    store.update(DEVICE, changed, remove=[(t, "k", "cold") for t in remove])
    return path


def test_each_shards_change_is_taken_and_the_rest_kept(tmp_path, base):
    one = _shard(tmp_path, base, "one", _entry(A, S1, S2))
    two = _shard(tmp_path, base, "two", _entry(B, S1, S3))
    three = _shard(tmp_path, base, "three")  # measured nothing it saved
    [merge] = plan_merge([one, two, three], base)
    assert not merge.conflicts and merge.unchanged == 1
    assert merge.taken_from == {str(one): 1, str(two): 1, str(three): 0}
    write_merge([merge], base)
    merged = _entries(base)
    assert merged[(A, "k", "cold")].saves == (S1, S2)
    assert merged[(B, "k", "cold")].saves == (S1, S3)
    assert merged[(C, "k", "cold")].saves == (S1,)
    assert "2 entries written" in merge.line() and "1 unchanged, 0 removed" in merge.line()


def test_identical_changes_and_removals_merge(tmp_path, base):
    same = _entry(A, S1, S2)
    one = _shard(tmp_path, base, "one", same, remove=[C])
    two = _shard(tmp_path, base, "two", same, remove=[C])  # both pruned C (--gpuperf-prune)
    [merge] = plan_merge([one, two], base)
    assert not merge.conflicts
    write_merge([merge], base)
    assert set(_entries(base)) == {(A, "k", "cold"), (B, "k", "cold")}


def test_a_removal_against_a_change_conflicts(tmp_path, base):
    one = _shard(tmp_path, base, "one", remove=[A])
    two = _shard(tmp_path, base, "two", _entry(A, S1, S2))
    [merge] = plan_merge([one, two], base)
    assert len(merge.conflicts) == 1
    assert f"{one / 'mi300x.toml'} (removed it)" in merge.conflicts[0]


def test_without_a_base_the_continued_history_wins(tmp_path, base):
    """--out holds no file yet: the shards' untouched entries are the base's, and what a shard
    saved continues their history, so each saved entry is recognised as the newer."""
    one = _shard(tmp_path, base, "one", _entry(A, S1, S2))
    two = _shard(tmp_path, base, "two", _entry(B, S1, S3))
    out = tmp_path / "out"
    [merge] = plan_merge([one, two], out)
    assert not merge.conflicts
    write_merge([merge], out)
    merged = _entries(out)
    assert merged[(A, "k", "cold")].saves == (S1, S2)
    assert merged[(B, "k", "cold")].saves == (S1, S3)
    assert merged[(C, "k", "cold")].saves == (S1,)


def test_a_history_that_lost_its_oldest_save_still_continues():
    saves = tuple(_save(0.8, f"2026-11-0{d}T00:00:00Z") for d in range(1, 7))
    assert extends(_entry(A, *saves[1:6]), _entry(A, *saves[:5]))  # --gpuperf-history 5
    assert not extends(_entry(A, *saves[:5]), _entry(A, *saves[1:6]))
    assert not extends(_entry(A, S1), _entry(A, S1))
    assert extends(_entry(A, S1), _entry(A, source="reported"))  # a first measured save
    other_code = _save(0.7, "2026-11-09T00:00:00Z", fingerprint="sha256:b")
    assert not extends(_entry(A, other_code), _entry(A, S1, S2))  # a new history


def test_two_different_changes_conflict_with_file_and_line_and_nothing_is_written(tmp_path, base):
    one = _shard(tmp_path, base, "one", _entry(B, S1, S2))
    two = _shard(tmp_path, base, "two", _entry(B, S1, S3))
    before = (base / "mi300x.toml").read_bytes()
    [merge] = plan_merge([one, two], base)
    [conflict] = merge.conflicts
    assert conflict.startswith("conflicting entries for test 't.py::test_b' measurement 'k'")
    for shard in (one, two):
        path = shard / "mi300x.toml"
        line = int(conflict.split(f"{path}:")[1].split()[0])
        assert path.read_text().splitlines()[line - 1] == f'id = "{B}"'
    code = main(["--baselines", str(one), str(two), "--out", str(base)])
    assert code == 1
    assert (base / "mi300x.toml").read_bytes() == before


def test_the_cli_merges_and_says_what_it_wrote(tmp_path, base, capsys):
    one = _shard(tmp_path, base, "one", _entry(A, S1, S2))
    assert main(["--baselines", str(one), "--out", str(base)]) == 0
    out = capsys.readouterr().out
    assert f"gpuperf: {base / 'mi300x.toml'}: 1 entry written (1 from {one})" in out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--baselines", "{missing}", "--out", "{base}"], "--baselines {missing}: does not exist"),
        (["--baselines", "{empty}", "--out", "{base}"], "no baseline files (<device>.toml) in it"),
        (["--baselines", "{base}"], "--baselines needs --out DIR"),
        (["x.json", "--baselines", "{base}", "--out", "{base}"], "merges baselines only"),
        (["--out", "{base}", "x.json"], "--out goes with --baselines"),
        ([], "give every shard's JSON report"),
        (["--baselines", "{broken}", "--out", "{base}"], "broken/mi300x.toml:3: not valid TOML"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(tmp_path, base, capsys, args, words):
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "mi300x.toml").write_text('schema = 2\ndevice = "mi300x"\n[[entry]\n')
    where = {"missing": tmp_path / "missing", "empty": tmp_path / "empty", "base": base}
    where["broken"] = tmp_path / "broken"
    before = (base / "mi300x.toml").read_bytes()
    with pytest.raises(SystemExit) as stopped:
        code = main([arg.format(**where) for arg in args])
        raise SystemExit(code)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert words.format(**where) in err
    assert (base / "mi300x.toml").read_bytes() == before


def test_a_file_changed_between_plan_and_write_is_refused(tmp_path, base):
    one = _shard(tmp_path, base, "one", _entry(A, S1, S2))
    merges = plan_merge([one], base)
    BaselineStore(base).save(DEVICE, [_entry(A, S1, S3)])  # another save in between
    with pytest.raises(BaselineError, match="changed in the file while the merge ran"):
        write_merge(merges, base)
    assert _entries(base)[(A, "k", "cold")].saves == (S1, S3)


def test_a_foreign_directory_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="is not a directory"):
        (tmp_path / "file").write_text("")
        plan_merge([tmp_path / "file"], tmp_path / "out")
    assert replace(_entry(A, S1)) == _entry(A, S1)


@pytest.mark.parametrize(
    ("out", "words"),
    [
        ("", "--out is empty: give the baseline directory to merge into"),
        ("{tmp}/nonexistent/dir", "--out {tmp}/nonexistent/dir: does not exist; give the merge"),
        ("{one}/mi300x.toml", "--out {one}/mi300x.toml: is not a directory"),
        ("{one}", "--out {one}: is also a shard's directory"),
    ],
)
def test_an_out_that_is_no_base_is_refused_and_nothing_is_created(
    tmp_path, base, capsys, monkeypatch, out, words
):
    """`--out /nonexistent/dir` created it and wrote every entry with no base, exit 0;
    `--out ''` wrote into the current folder."""
    one = _shard(tmp_path, base, "one", _entry(A, S1, S2))
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    target = out.format(tmp=tmp_path, one=one)
    assert main(["--baselines", str(one), "--out", target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words.format(tmp=tmp_path, one=one) in err
    assert sorted(tmp_path.rglob("*")) == before  # no folder, no file, no temporary


SIGTERM_MID_WRITE = """
import os, signal, sys
from pytest_gpuperf.baseline import file_write

replace = file_write.os.replace


def terminated_at_the_rename(source, target):
    os.kill(os.getpid(), signal.SIGTERM)  # a cancelled CI job, the temporary written
    replace(source, target)


file_write.os.replace = terminated_at_the_rename
from pytest_gpuperf.commands.merge.__main__ import main

sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_while_the_merge_writes_leaves_the_old_file_and_no_temporary(tmp_path, base):
    """SIGTERM during `merge --baselines` left a 6 MB temporary in the output folder."""
    one = _shard(tmp_path, base, "one", _entry(A, S1, S2))
    before = (base / "mi300x.toml").read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", SIGTERM_MID_WRITE, "--baselines", str(one), "--out", str(base)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert done.stderr.count("\n") == 1 and "interrupted (SIGTERM)" in done.stderr
    assert (base / "mi300x.toml").read_bytes() == before
    assert [p.name for p in base.iterdir() if p.name.endswith(".tmp")] == []
