"""Baseline files: schema 2 with a history of saves, schema 1 migrated on load, validation with
file:line, merge-on-save, atomic and concurrent writes, links never followed."""

from __future__ import annotations

import errno
import multiprocessing
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import filelock
import pytest

from pytest_gpuperf.baseline import BaselineEntry, BaselineStore, SaveRecord
from pytest_gpuperf.baseline import store as store_module
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.errors import BaselineError, ConfigError, SaveInterrupted
from pytest_gpuperf.gate.saving import entry_from_history

TEST_ID = "tests/perf/test_vector_add.py::test_vector_add[32M]"
BYTES = 3 * 4 * 32 * 2**20  # the seed's 32M fp32 vector add: two reads, one write


def make_measurement(name: str = "vector_add", time_s: float = 105.7e-6, **changes) -> Measurement:
    fields = dict(
        name=name,
        kernel="vector_add",
        cache="cold",
        bytes_moved=BYTES,
        time_s=time_s,
        time_ci_s=(time_s * 0.995, time_s * 1.006),
        samples_s=(time_s,) * 40,
        peak_bps=5.3e12,
        device_key="mi300x",
        device_name="AMD Instinct MI300X",
        backend="hip",
        simulated=False,
        queue_method="flush kernel",
        grid=(131072, 1, 1),
        block=(256, 1, 1),
        fingerprint="sha256:aa",
    )
    fields.update(changes)
    return Measurement(**fields)


def make_save(efficiency: float = 0.7185, **changes) -> SaveRecord:
    fields = dict(
        efficiency=efficiency,
        efficiency_ci=(efficiency * 0.995, efficiency * 1.005),
        time_s=BYTES / efficiency / 5.3e12,
        when="2025-01-02T03:04:05Z",
        commit="0123456789abcdef",
        fingerprint="sha256:aa",
        samples=40,
        device_name="AMD Instinct MI300X",
        backend="hip",
    )
    fields.update(changes)
    return SaveRecord(**fields)


def make_entry(
    test_id: str = TEST_ID, name: str = "vector_add", saves: int = 1, **changes
) -> BaselineEntry:
    history = [make_save(0.7185 * (1 + 0.002 * i)) for i in range(saves)]
    entry = entry_from_history(make_measurement(name), test_id, history, prior_spread=0.07)
    return replace(entry, **changes)


VALID_V1 = f"""\
schema = 1
device = "mi300x"

[[entry]]
id = "{TEST_ID}"
name = "vector_add"
efficiency = 0.7185
efficiency_ci = [0.70, 0.73]
run_spread = 0.07
bandwidth_bps = 3.808e12
time_s = 1.057e-4
bytes_moved = {BYTES}
cache = "cold"
source = "measured"

[[entry]]
id = "tests/perf/test_copy.py::test_copy"
name = "copy"
efficiency = 0.80
efficiency_ci = [0.79, 0.81]
run_spread = 0.05
bandwidth_bps = 4.24e12
time_s = 2.0e-4
bytes_moved = 848000000
cache = "rotate"

[entry.provenance]
when = "2025-01-02T03:04:05Z"
samples = 120
"""

VALID = f"""\
schema = 2
device = "mi300x"

[[entry]]
id = "{TEST_ID}"
name = "vector_add"
cache = "cold"
source = "measured"
efficiency = 0.7185
efficiency_ci = [0.70, 0.73]
run_spread = 0.004
spread_basis = "history"
bandwidth_bps = 3.808e12
time_s = 1.057e-4
bytes_moved = {BYTES}

[[entry.save]]
efficiency = 0.7180
efficiency_ci = [0.71, 0.72]
time_s = 1.058e-4
fingerprint = "sha256:aa"
samples = 120

[[entry.save]]
efficiency = 0.7190
efficiency_ci = [0.71, 0.73]
time_s = 1.056e-4
fingerprint = "sha256:aa"

[[entry]]
id = "tests/perf/test_vector_add.py::test_vector_add_seed"
name = "vector_add"
cache = "cold"
source = "reported"
efficiency = 0.7185
efficiency_ci = [0.7185, 0.7185]
run_spread = 0.07
bandwidth_bps = 3.808e12
time_s = 1.057e-4
bytes_moved = {BYTES}
reported_in = "Making memory bound kernels go brr on a MI300X: vector add 32M fp32"
"""

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")


def write(directory: Path, text: str, key: str = "mi300x") -> Path:
    path = directory / f"{key}.toml"
    path.write_text(text)
    return path


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    lines = text.splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if needle in line]
    return hits[occurrence - 1]


@pytest.fixture(autouse=True)
def _own_lock_folder(tmp_path_factory, monkeypatch):
    """Save locks live in the machine's lock folder: each test gets its own."""
    monkeypatch.setenv("GPUPERF_LOCK_DIR", str(tmp_path_factory.mktemp("locks")))


def test_saved_entry_round_trips_and_reads_as_a_baseline_ref(tmp_path):
    store = BaselineStore(tmp_path)
    entry = make_entry(saves=3)
    path = store.save("mi300x", [entry])

    assert path == tmp_path / "mi300x.toml"
    assert BaselineStore(tmp_path).load("mi300x").get(TEST_ID, "vector_add", "cold") == entry
    ref = store.lookup("mi300x", TEST_ID, "vector_add", "cold")
    assert ref is not None
    assert ref.efficiency == pytest.approx(0.7185 * 1.002, rel=1e-5)  # the median save
    assert ref.spread_basis == "history" and ref.saves == 3
    assert ref.cache == "cold" and ref.source == "measured"
    assert ref.path == str(path) and ref.device_key == "mi300x"
    assert "AMD Instinct MI300X" in ref.provenance
    assert "commit 0123456789ab" in ref.provenance
    assert "median of 3 saves" in ref.provenance
    assert ref.fingerprint == "sha256:aa"


ODD_IDS = [
    "tests/perf/test_x.py::test_k[naïve-Δ-日本]",
    "tests/perf/test_x.py::test_k[\"quoted\" 'both']",
    "tests/perf/test_x.py::test_k[back\\slash-#hash-=eq]",
    "tests/perf/test_x.py::test_k[line\nbreak\ttab]",
    "tests/perf/test_x.py::Test[a]::test_k[[nested]]",
    "tests/perf/test_x.py::test_k[\u200b zero width]",
]


def test_odd_test_ids_round_trip(tmp_path):
    """Parametrised ids carry whatever the user's values print as."""
    store = BaselineStore(tmp_path)
    store.save("mi300x", [make_entry(test_id) for test_id in ODD_IDS])
    loaded = BaselineStore(tmp_path).load("mi300x")
    for test_id in ODD_IDS:
        entry = loaded.get(test_id, "vector_add", "cold")
        assert entry is not None and entry.test_id == test_id


def test_saved_file_is_human_diffable(tmp_path):
    store = BaselineStore(tmp_path)
    store.save("mi300x", [make_entry("b::test", saves=2), make_entry("a::test")])
    text = (tmp_path / "mi300x.toml").read_text()

    assert text.index('id = "a::test"') < text.index('id = "b::test"')  # stable order
    assert "grid = [131072, 1, 1]" in text  # short arrays on one line
    assert text.count("[[entry]]") == 2
    assert text.count("\n[[entry.save]]") == 3
    assert "schema = 2" in text
    store.save("mi300x", [make_entry("a::test")])  # re-saving the same entries changes nothing
    assert (tmp_path / "mi300x.toml").read_text() == text


def _entry_keys(text: str) -> list[str]:
    """The keys of the file's first [[entry]] table, in the order written."""
    table = text[text.index("\n[[entry]]") :].split("\n[[entry.save]]")[0]
    return [line.split(" = ")[0] for line in table.splitlines() if " = " in line]


def test_an_entry_table_holds_its_fields_in_order_and_leaves_defaults_out(tmp_path):
    store = BaselineStore(tmp_path)
    store.save("mi300x", [make_entry(kernel="", grid=None, block=None, prior_spread=0.0)])
    text = (tmp_path / "mi300x.toml").read_text()
    assert _entry_keys(text) == [
        "id",
        "name",
        "cache",
        "source",
        "efficiency",
        "efficiency_ci",
        "run_spread",
        "spread_basis",
        "bandwidth_bps",
        "time_s",
        "bytes_moved",
    ]
    reported = make_entry(source="reported", reported_in="the blog: 71.85%", note="rocprof")
    store.save("mi300x", [replace(reported, saves=())])
    text = (tmp_path / "mi300x.toml").read_text()
    optional = ["prior_spread", "grid", "block", "reported_in", "note"]
    assert _entry_keys(text)[-len(optional) - 1 :] == ["bytes_moved", *optional]
    assert "grid = [131072, 1, 1]" in text and 'reported_in = "the blog: 71.85%"' in text


def test_entries_are_keyed_by_cache_mode_too(tmp_path):
    """A hot save must not replace the cold entry of the same measurement."""
    store = BaselineStore(tmp_path)
    cold = make_entry()
    hot = replace(make_entry(), cache="hot", efficiency=1.9, efficiency_ci=(1.8, 2.0))
    store.save("mi300x", [cold])
    store.save("mi300x", [hot])
    loaded = BaselineStore(tmp_path).load("mi300x")
    assert loaded.get(TEST_ID, "vector_add", "cold") == cold
    assert loaded.get(TEST_ID, "vector_add", "hot").efficiency == 1.9


def test_schema_1_files_load_as_histories_of_one_save(tmp_path):
    write(tmp_path, VALID_V1)
    loaded = BaselineStore(tmp_path).load("mi300x")
    assert loaded.schema == 1 and len(loaded) == 2
    first = loaded.get(TEST_ID, "vector_add", "cold")
    assert first.spread_basis == "prior" and first.run_spread == 0.07
    assert len(first.saves) == 1 and first.saves[0].efficiency == 0.7185
    copy = loaded.get("tests/perf/test_copy.py::test_copy", "copy", "rotate")
    assert copy.saves[0].samples == 120 and copy.saves[0].when == "2025-01-02T03:04:05Z"
    assert copy.to_ref("p").saves == 1

    # a save migrates the whole file to schema 2 and keeps every entry
    BaselineStore(tmp_path).save("mi300x", [make_entry(name="new")])
    text = (tmp_path / "mi300x.toml").read_text()
    assert "schema = 2" in text
    migrated = BaselineStore(tmp_path).load("mi300x")
    assert migrated.schema == 2 and len(migrated) == 3
    assert migrated.get(TEST_ID, "vector_add", "cold") == first


def test_schema_1_reported_entries_migrate_with_their_document(tmp_path):
    text = VALID_V1.replace(
        'source = "measured"',
        'source = "reported"\n\n[entry.provenance]\n'
        'reported_in = "the blog: 71.85%"\nnote = "rocprof"',
    )
    write(tmp_path, text)
    entry = BaselineStore(tmp_path).load("mi300x").get(TEST_ID, "vector_add", "cold")
    assert entry.source == "reported" and entry.saves == ()
    assert entry.reported_in == "the blog: 71.85%" and entry.note == "rocprof"
    assert entry.describe() == "reported in the blog: 71.85% (rocprof)"


def test_lookup_misses_and_devices_with(tmp_path):
    store = BaselineStore(tmp_path)
    assert store.lookup("mi300x", TEST_ID, "vector_add", "cold") is None  # no file at all
    assert store.devices_with(TEST_ID, "vector_add", "cold") == []

    store.save("h100-sxm", [make_entry()])
    store.save("mi300x", [make_entry(name="other")])

    assert store.lookup("mi300x", TEST_ID, "vector_add", "cold") is None
    assert store.devices_with(TEST_ID, "vector_add", "cold") == ["h100-sxm"]
    assert store.devices_with(TEST_ID, "other", "cold") == ["mi300x"]
    assert store.devices_with(TEST_ID, "other", "hot") == []
    assert store.device_keys() == ["h100-sxm", "mi300x"]


def test_save_merges_and_never_drops_other_entries(tmp_path):
    write(tmp_path, VALID)
    store = BaselineStore(tmp_path)
    updated = make_entry(efficiency=0.75)
    second_name = make_entry(name="vector_add_bypass")

    store.save("mi300x", [updated, second_name])

    loaded = BaselineStore(tmp_path).load("mi300x")
    assert len(loaded) == 3
    assert loaded.get(TEST_ID, "vector_add", "cold").efficiency == 0.75  # replaced
    assert loaded.get(TEST_ID, "vector_add_bypass", "cold") == second_name  # added
    reported = loaded.get(
        "tests/perf/test_vector_add.py::test_vector_add_seed", "vector_add", "cold"
    )
    assert reported.source == "reported" and reported.reported_in.startswith("Making memory")


def test_update_can_prune_entries(tmp_path):
    write(tmp_path, VALID)
    store = BaselineStore(tmp_path)
    store.update("mi300x", [], remove=[(TEST_ID, "vector_add", "cold")])
    loaded = BaselineStore(tmp_path).load("mi300x")
    assert list(loaded.entries) == [
        ("tests/perf/test_vector_add.py::test_vector_add_seed", "vector_add", "cold")
    ]


def test_reported_entry_must_name_its_document(tmp_path):
    text = VALID.replace('reported_in = "Making', 'note = "Making')
    write(tmp_path, text)
    with pytest.raises(BaselineError, match="reported_in") as caught:
        BaselineStore(tmp_path).load("mi300x")
    assert caught.value.line == line_of(text, 'source = "reported"')


def test_corrupt_toml_names_file_and_line(tmp_path):
    text = VALID.replace("run_spread = 0.07", "run_spread = 0.07 0.08")
    path = write(tmp_path, text)
    with pytest.raises(BaselineError) as caught:
        BaselineStore(tmp_path).load("mi300x")
    error = caught.value
    line = line_of(text, "run_spread = 0.07 0.08")
    assert error.path == str(path) and error.line == line
    assert str(error).startswith(f"{path}:{line}: not valid TOML")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("efficiency = 0.7185", 'efficiency = "high"', "'efficiency' must be a number"),
        ("efficiency = 0.7185", "efficiency = 1.7", r"must be in \(0, 1.5\] for cache='cold'"),
        ("efficiency = 0.7185", "efficiency = 0", r"must be in \(0, 1.5\]"),
        ('cache = "cold"', 'cache = "warm"', "must be one of cold, hot, rotate"),
        ("run_spread = 0.004", "run_spread = -0.1", r"must be in \[0, 1\]"),
        ("efficiency_ci = [0.70, 0.73]", "efficiency_ci = [0.73, 0.70]", "low <= high"),
        ("efficiency_ci = [0.70, 0.73]", "efficiency_ci = [0.70]", "list of 2 numbers"),
        (f"bytes_moved = {BYTES}", "bytes_moved = 1.5", "'bytes_moved' must be an integer"),
        ('source = "measured"', 'source = "guessed"', "must be one of measured, reported"),
        ('spread_basis = "history"', 'spread_basis = "guess"', "must be one of prior, history"),
        ("run_spread = 0.004", "run_sprad = 0.004", "'run_sprad' is not a known key"),
        ("samples = 120", "samples = -3", "'samples' must be >= 0"),
        ("samples = 120", 'samples = "many"', "'samples' must be an integer"),
        ("samples = 120", "sample = 120", "'sample' is not a known key"),
        ("efficiency = 0.7180", "efficiency = 7.18", r"save #1: 'efficiency' must be in"),
        ("schema = 2", "schema = 3", "schema = 3 is not supported.*newer"),
        ('device = "mi300x"', 'device = "h100-sxm"', 'file is for device "mi300x"'),
    ],
)
def test_broken_entry_names_file_line_and_problem(tmp_path, old, new, message):
    assert old in VALID
    text = VALID.replace(old, new, 1)
    path = write(tmp_path, text)
    with pytest.raises(BaselineError, match=message) as caught:
        BaselineStore(tmp_path).load("mi300x")
    assert caught.value.path == str(path)
    assert caught.value.line == line_of(text, new.split("\n")[0]), str(caught.value)


def test_missing_keys_point_at_their_entry(tmp_path):
    text = VALID.replace("run_spread = 0.004\n", "")
    write(tmp_path, text)
    with pytest.raises(BaselineError, match="'run_spread' is missing") as caught:
        BaselineStore(tmp_path).load("mi300x")
    assert caught.value.line == line_of(text, "[[entry]]")


def test_a_learned_spread_needs_a_history(tmp_path):
    start = VALID.index("[[entry.save]]")
    end = VALID.index("[[entry]]", start)
    text = VALID[:start] + VALID[end:]
    write(tmp_path, text)
    with pytest.raises(BaselineError, match="needs at least two"):
        BaselineStore(tmp_path).load("mi300x")


def test_duplicate_entries_name_both_lines(tmp_path):
    duplicate = VALID.replace(
        'id = "tests/perf/test_vector_add.py::test_vector_add_seed"', f'id = "{TEST_ID}"'
    )
    write(tmp_path, duplicate)
    with pytest.raises(BaselineError, match=r"duplicate entry.*the first is at line 5") as caught:
        BaselineStore(tmp_path).load("mi300x")
    assert caught.value.line == line_of(duplicate, f'id = "{TEST_ID}"', 2)


def test_a_broken_file_is_never_overwritten(tmp_path):
    path = write(tmp_path, VALID.replace('cache = "cold"', 'cache = "warm"'))
    before = path.read_bytes()
    with pytest.raises(BaselineError, match="warm"):
        BaselineStore(tmp_path).save("mi300x", [make_entry(name="new")])
    assert path.read_bytes() == before

    path.write_text("schema = \n")
    before = path.read_bytes()
    with pytest.raises(BaselineError, match="not valid TOML"):
        BaselineStore(tmp_path).save("mi300x", [make_entry(name="new")])
    assert path.read_bytes() == before


def test_an_invalid_new_entry_is_refused_before_writing(tmp_path):
    path = write(tmp_path, VALID)
    with pytest.raises(BaselineError, match=r"not saved: a new entry is invalid.*efficiency"):
        BaselineStore(tmp_path).save("mi300x", [make_entry(efficiency=2.0)])
    assert path.read_text() == VALID
    with pytest.raises(BaselineError, match="two new entries"):
        BaselineStore(tmp_path).save("mi300x", [make_entry(), make_entry()])


def test_hot_cache_entries_may_exceed_the_hbm_peak(tmp_path):
    store = BaselineStore(tmp_path)
    hot = replace(make_entry(), cache="hot", efficiency=3.2, efficiency_ci=(3.1, 3.3), saves=())
    store.save("mi300x", [hot])
    assert store.lookup("mi300x", TEST_ID, "vector_add", "hot").efficiency == 3.2


def test_tiny_efficiencies_keep_their_precision(tmp_path):
    """A kernel moving a few hundred bytes has efficiencies near 1e-7: stored to 6
    significant digits, not 5 decimals (which turned them into 0 or -32% on identical runs)."""
    measurement = make_measurement(bytes_moved=256, time_s=2.01234e-6)
    save = make_save(
        efficiency=measurement.efficiency,
        efficiency_ci=measurement.efficiency_ci,
        time_s=measurement.time_s,
    )
    entry = entry_from_history(measurement, TEST_ID, [save], prior_spread=0.02)
    store = BaselineStore(tmp_path)
    store.save("mi300x", [entry])
    loaded = BaselineStore(tmp_path).lookup("mi300x", TEST_ID, "vector_add", "cold")
    assert loaded.efficiency == pytest.approx(measurement.efficiency, rel=1e-5)
    assert loaded.efficiency > 0


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = write(tmp_path, VALID)

    def broken_replace(source, destination):
        raise OSError(errno.ENOSPC, "No space left on device", source)

    monkeypatch.setattr(store_module.os, "replace", broken_replace)
    with pytest.raises(
        BaselineError, match=r"not saved: cannot write .*\.tmp: No space left on device \(ENOSPC\)"
    ):
        BaselineStore(tmp_path).save("mi300x", [make_entry(name="new")])
    assert path.read_text() == VALID
    # no temporary, and no lock beside the file: it lives in the shared lock folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mi300x.toml"]


def test_the_next_save_removes_the_temporaries_a_killed_save_left(tmp_path):
    write(tmp_path, VALID)
    stray = tmp_path / ".mi300x.toml.k1ll3d_x.tmp"
    stray.write_text("half a file")
    other = tmp_path / ".other.toml.abcdefgh.tmp"  # another file's: not this save's to remove
    other.write_text("x")
    BaselineStore(tmp_path).save("mi300x", [make_entry(name="new")])
    assert not stray.exists() and other.exists()
    assert len(BaselineStore(tmp_path).load("mi300x")) == 3


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = write(tmp_path, VALID)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert len(BaselineStore(tmp_path).load("mi300x")) == 2


def test_ctrl_c_in_a_save_says_where_and_whether_it_reached_the_disk(tmp_path, monkeypatch):
    path = write(tmp_path, VALID)

    def interrupted(source, destination):
        raise KeyboardInterrupt

    monkeypatch.setattr(store_module.os, "replace", interrupted)
    with pytest.raises(
        SaveInterrupted, match="interrupted \\(Ctrl-C\\) while writing it"
    ) as caught:
        BaselineStore(tmp_path).save("mi300x", [make_entry(name="new")])
    assert caught.value.saved is False and isinstance(caught.value, KeyboardInterrupt)
    assert path.read_text() == VALID
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mi300x.toml"]


def test_a_lock_held_too_long_is_a_clear_error(tmp_path):
    path = write(tmp_path, VALID)
    held = filelock.FileLock(str(store_module.lock_path_for(path)))
    with held, pytest.raises(BaselineError, match=r"not saved: could not lock .* within 0 s"):
        BaselineStore(tmp_path, lock_timeout_s=0.05).save("mi300x", [make_entry(name="x")])
    assert path.read_text() == VALID


def test_links_at_the_file_or_its_lock_are_never_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("secret")
    victim.chmod(0o600)
    directory = tmp_path / "baselines"
    directory.mkdir()
    lock = store_module.lock_path_for(directory / "mi300x.toml")
    lock.unlink(missing_ok=True)
    lock.symlink_to(victim)
    with pytest.raises(BaselineError, match="symbolic link"):
        BaselineStore(directory).save("mi300x", [make_entry()])
    assert victim.read_text() == "secret" and (victim.stat().st_mode & 0o777) == 0o600
    lock.unlink()
    (directory / "mi300x.toml").symlink_to(victim)
    with pytest.raises(BaselineError, match="symbolic link"):
        BaselineStore(directory).save("mi300x", [make_entry()])
    assert victim.read_text() == "secret"


def test_a_baseline_directory_that_is_a_file_or_a_dangling_link_is_named(tmp_path):
    as_file = tmp_path / "baselines"
    as_file.write_text("oops")
    with pytest.raises(BaselineError, match="is a file, not a directory"):
        BaselineStore(as_file).check_directory()
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(BaselineError, match="does not exist"):
        BaselineStore(dangling).check_directory()


def test_a_read_only_directory_gives_a_clear_error_and_keeps_the_file(tmp_path, monkeypatch):
    """What a save meets in a directory it may not write (simulated: CI runs as root, which
    writes anywhere)."""
    path = write(tmp_path, VALID)

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path))

    monkeypatch.setattr(store_module.tempfile, "mkstemp", denied)
    with pytest.raises(
        BaselineError, match=r"Permission denied \(EACCES\); make it writable.*left as it was"
    ):
        BaselineStore(tmp_path).save("mi300x", [make_entry(name="new")])
    assert path.read_text() == VALID


def _save_then_hang(directory: str, ready) -> None:
    """Child: write the temporary file in full, then hang just before the rename."""

    def hang(source, destination):
        ready.set()
        time.sleep(60)

    store_module.os.replace = hang
    BaselineStore(directory).save("mi300x", [make_entry(name="new")])


@needs_fork
def test_a_save_killed_half_way_leaves_the_old_file_intact(tmp_path):
    path = write(tmp_path, VALID)
    context = multiprocessing.get_context("fork")
    ready = context.Event()
    child = context.Process(target=_save_then_hang, args=(str(tmp_path), ready))
    child.start()
    try:
        assert ready.wait(30), "the child never reached the rename"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
    assert path.read_text() == VALID
    assert len(BaselineStore(tmp_path).load("mi300x")) == 2
    # the lock died with the child, so the next save goes through
    BaselineStore(tmp_path, lock_timeout_s=5).save("mi300x", [make_entry(name="new")])
    assert len(BaselineStore(tmp_path).load("mi300x")) == 3


def _save_many(directory: str, worker: int, barrier) -> None:
    barrier.wait()
    store = BaselineStore(directory)
    for round_ in range(3):
        store.save("mi300x", [make_entry(test_id=f"tests/perf/test_w{worker}.py::test_{round_}")])


@needs_fork
def test_concurrent_saves_from_eight_processes_lose_nothing(tmp_path):
    write(tmp_path, VALID)
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(8)
    workers = [
        context.Process(target=_save_many, args=(str(tmp_path), i, barrier)) for i in range(8)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join(60)
    assert [p.exitcode for p in workers] == [0] * 8

    loaded = BaselineStore(tmp_path).load("mi300x")
    expected = {
        (f"tests/perf/test_w{w}.py::test_{r}", "vector_add", "cold")
        for w in range(8)
        for r in range(3)
    }
    assert expected <= set(loaded.entries)
    assert len(loaded) == 2 + 24


def test_load_notices_changes_on_disk(tmp_path):
    store = BaselineStore(tmp_path)
    store.save("mi300x", [make_entry()])
    assert len(store.load("mi300x")) == 1
    BaselineStore(tmp_path).save("mi300x", [make_entry(name="second")])  # another process
    assert len(store.load("mi300x")) == 2


def test_unusable_device_key_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot name a baseline file"):
        BaselineStore(tmp_path).load("../etc/passwd")


def test_empty_file_of_entries_is_valid(tmp_path):
    write(tmp_path, 'schema = 2\ndevice = "mi300x"\n')
    assert len(BaselineStore(tmp_path).load("mi300x")) == 0


def test_an_entry_that_would_not_load_back_is_dropped_from_its_save_not_the_file(tmp_path):
    """The session checks each planned entry alone: one that the file's merge would refuse
    (the merge validates the whole file) loses its own save, with the reason on its row,
    and cannot cost the other entries of its file theirs."""
    from pytest_gpuperf.gate.judge import Judged
    from pytest_gpuperf.record.checks import NO_BASELINE, BaselineCheck
    from pytest_gpuperf.record.verdict import SaveAction, Verdict
    from pytest_gpuperf.session.pending_saves import PendingSaves

    saves = PendingSaves()
    save = SaveAction(saved=True, path=str(tmp_path / "mi300x.toml"), device_key="mi300x")
    verdict = Verdict(status="pass", baseline=BaselineCheck(NO_BASELINE), save=save)
    good = Judged(make_measurement(), verdict, "mi300x", make_entry())
    bad = Judged(
        make_measurement(name="other"),
        verdict,
        "mi300x",
        make_entry(name="other", efficiency=200.0),
    )
    kept, dropped = saves.keep(TEST_ID, [good, bad])
    assert kept == good
    assert dropped.entry is None and dropped.save_key == ""
    assert dropped.verdict.save is not None and dropped.verdict.save.saved is False
    assert dropped.verdict.save.why_not == "invalid"
    assert "'efficiency' must be in (0, 1.5] for cache='cold'" in dropped.verdict.save.error
    outcome = saves.flush(lambda: BaselineStore(tmp_path), lambda path: path.name)
    assert outcome.written == ["saved 1 measurement to mi300x.toml"] and not outcome.problems
    assert len(BaselineStore(tmp_path).load("mi300x")) == 1


def test_two_saves_of_one_entry_in_a_session_are_refused_by_name(tmp_path):
    """Two tests of one id (a duplicate parametrization) saving the same measurement: the
    second save would silently replace the first in the file."""
    from pytest_gpuperf.errors import GpuPerfError
    from pytest_gpuperf.gate.judge import Judged
    from pytest_gpuperf.record.checks import NO_BASELINE, BaselineCheck
    from pytest_gpuperf.record.verdict import SaveAction, Verdict
    from pytest_gpuperf.session.pending_saves import PendingSaves

    saves = PendingSaves()
    save = SaveAction(saved=True, path=str(tmp_path / "mi300x.toml"), device_key="mi300x")
    verdict = Verdict(status="pass", baseline=BaselineCheck(NO_BASELINE), save=save)
    judged = Judged(make_measurement(), verdict, "mi300x", make_entry())
    saves.keep(TEST_ID, [judged])
    with pytest.raises(GpuPerfError, match=r"measurement 'vector_add' \(cache cold\) was already"):
        saves.keep(TEST_ID, [judged])
    outcome = saves.flush(lambda: BaselineStore(tmp_path), str)
    assert len(outcome.written) == 1 and len(BaselineStore(tmp_path).load("mi300x")) == 1
    assert saves.flush(lambda: pytest.fail("nothing to save: no store"), str).written == []


def test_a_save_is_found_in_the_file_read_back_by_its_record(tmp_path):
    """What the controller checks each "saved" row against: the record the save planned
    (its time stamp and efficiency) in the entry as the file holds it, read under its lock."""
    from pytest_gpuperf.gate.saving import SaveContext, found_in, plan_save

    store = BaselineStore(tmp_path)
    m = make_measurement()
    context = SaveContext(
        test_id=TEST_ID,
        path=str(store.path_for("mi300x")),
        device_key="mi300x",
        when="2026-11-25T13:00:00Z",
    )
    action, entry = plan_save(m, None, context)
    assert entry is not None and action.when == "2026-11-25T13:00:00Z"
    assert not found_in(store.read_back("mi300x").get(TEST_ID, m.name, m.cache), action, m)
    store.save("mi300x", [entry])
    again = store.read_back("mi300x").get(TEST_ID, m.name, m.cache)
    assert found_in(again, action, m)
    other = replace(action, when="2026-11-25T13:00:01Z")  # another run's save of the test
    assert not found_in(again, other, m)
