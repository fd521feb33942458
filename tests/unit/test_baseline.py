"""Baseline files: validation with file:line, merge-on-save, atomic and concurrent writes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gpuperf import baseline
from pytest_gpuperf.baseline import BaselineEntry, BaselineStore, Provenance
from pytest_gpuperf.errors import BaselineError, ConfigError
from pytest_gpuperf.results import Measurement

TEST_ID = "tests/perf/test_vector_add.py::test_vector_add[32M]"
BYTES = 3 * 4 * 32 * 2**20  # the MI300X blog post's 32M fp32 vector add: 2 reads, 1 write


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
    )
    fields.update(changes)
    return Measurement(**fields)


def make_entry(test_id: str = TEST_ID, name: str = "vector_add", **changes) -> BaselineEntry:
    entry = BaselineEntry.from_measurement(
        make_measurement(name),
        test_id,
        run_spread=0.07,
        provenance=Provenance(when="2025-01-02T03:04:05Z", commit="0123456789abcdef"),
    )
    return replace(entry, **changes)


VALID = f"""\
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


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")


def write(directory: Path, text: str, key: str = "mi300x") -> Path:
    path = directory / f"{key}.toml"
    path.write_text(text)
    return path


def test_saved_entry_round_trips_and_reads_as_a_baseline_ref(tmp_path):
    store = BaselineStore(tmp_path)
    entry = make_entry()
    path = store.save("mi300x", [entry])

    assert path == tmp_path / "mi300x.toml"
    assert BaselineStore(tmp_path).load("mi300x").get(TEST_ID, "vector_add") == entry
    ref = store.lookup("mi300x", TEST_ID, "vector_add")
    assert ref is not None
    assert ref.efficiency == pytest.approx(BYTES / 105.7e-6 / 5.3e12, abs=1e-5)
    assert ref.run_spread == 0.07
    assert ref.cache == "cold"
    assert ref.source == "measured"
    assert ref.path == str(path)
    assert "AMD Instinct MI300X" in ref.provenance
    assert "commit 0123456789ab" in ref.provenance
    assert "40 samples" in ref.provenance


def test_saved_file_is_human_diffable(tmp_path):
    store = BaselineStore(tmp_path)
    store.save("mi300x", [make_entry("b::test"), make_entry("a::test")])
    text = (tmp_path / "mi300x.toml").read_text()

    assert text.index('id = "a::test"') < text.index('id = "b::test"')  # stable order
    assert "grid = [131072, 1, 1]" in text  # short arrays on one line
    assert text.count("[[entry]]") == 2
    # re-saving the same entries changes nothing
    store.save("mi300x", [make_entry("a::test")])
    assert (tmp_path / "mi300x.toml").read_text() == text


def test_from_measurement_takes_device_facts_from_the_measurement():
    measurement = make_measurement(simulated=True, backend="sim", device_name="sim MI300X")
    entry = BaselineEntry.from_measurement(measurement, TEST_ID, run_spread=0.0712345)

    assert entry.provenance.simulated
    assert entry.provenance.backend == "sim"
    assert entry.provenance.samples == 40
    assert entry.provenance.when.endswith("Z")
    assert entry.provenance.plugin_version
    assert entry.run_spread == 0.0712
    assert entry.efficiency_ci[0] <= entry.efficiency <= entry.efficiency_ci[1]
    assert entry.to_ref("x").provenance.startswith("simulated")


def test_lookup_misses_and_devices_with(tmp_path):
    store = BaselineStore(tmp_path)
    assert store.lookup("mi300x", TEST_ID, "vector_add") is None  # no file at all
    assert store.devices_with(TEST_ID, "vector_add") == []

    store.save("h100-sxm", [make_entry()])
    store.save("mi300x", [make_entry(name="other")])

    assert store.lookup("mi300x", TEST_ID, "vector_add") is None
    assert store.devices_with(TEST_ID, "vector_add") == ["h100-sxm"]
    assert store.devices_with(TEST_ID, "other") == ["mi300x"]
    assert store.device_keys() == ["h100-sxm", "mi300x"]


def test_save_merges_and_never_drops_other_entries(tmp_path):
    path = write(tmp_path, VALID)
    store = BaselineStore(tmp_path)
    updated = make_entry(efficiency=0.75)
    second_name = make_entry(name="vector_add_bypass")

    store.save("mi300x", [updated, second_name])

    loaded = BaselineStore(tmp_path).load("mi300x")
    assert len(loaded) == 3
    assert loaded.get(TEST_ID, "vector_add").efficiency == 0.75  # replaced
    assert loaded.get(TEST_ID, "vector_add_bypass") == second_name  # added
    kept = loaded.get("tests/perf/test_copy.py::test_copy", "copy")  # untouched
    assert (kept.efficiency, kept.cache, kept.provenance.samples) == (0.80, "rotate", 120)
    assert kept.source == "measured"  # the default when a hand-written entry omits it
    assert path.exists()


def test_reported_entry_round_trips(tmp_path):
    reported = make_entry(
        test_id="tests/perf/test_vector_add.py::test_vector_add_seed",
        source="reported",
        efficiency=0.7185,
        efficiency_ci=(0.7185, 0.7185),
        provenance=Provenance(
            reported_in="Making memory bound kernels go brr on a MI300X: vector add 32M fp32",
            note="rocprof counters, 71.85% of 5.3 TB/s",
        ),
    )
    store = BaselineStore(tmp_path)
    store.save("mi300x", [reported])

    loaded = BaselineStore(tmp_path).load("mi300x").get(reported.test_id, "vector_add")
    assert loaded == reported
    ref = reported.to_ref("p")
    assert ref.source == "reported"
    assert ref.provenance.startswith("reported in Making memory bound kernels go brr on a MI300X")


def test_reported_entry_must_name_its_document(tmp_path):
    text = VALID.replace('source = "measured"', 'source = "reported"')
    write(tmp_path, text)
    with pytest.raises(BaselineError, match="reported_in") as caught:
        BaselineStore(tmp_path).load("mi300x")
    assert caught.value.line == 14


def test_corrupt_toml_names_file_and_line(tmp_path):
    text = VALID.replace("efficiency = 0.80", "efficiency = 0.80 0.81")
    path = write(tmp_path, text)
    with pytest.raises(BaselineError) as caught:
        BaselineStore(tmp_path).load("mi300x")
    error = caught.value
    assert error.path == str(path)
    assert error.line == 19
    assert str(error).startswith(f"{path}:19: not valid TOML")


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ("efficiency = 0.7185", 'efficiency = "high"', 7, "'efficiency' must be a number"),
        ("efficiency = 0.7185", "efficiency = 1.7", 7, r"must be in \(0, 1.5\] for cache='cold'"),
        ("efficiency = 0.7185", "efficiency = 0", 7, r"must be in \(0, 1.5\]"),
        ('cache = "cold"', 'cache = "warm"', 13, "must be one of cold, hot, rotate"),
        ("run_spread = 0.07\n", "", 4, "'run_spread' is missing"),
        ("run_spread = 0.07\n", "run_spread = -0.1\n", 9, r"must be in \[0, 1\]"),
        ("efficiency_ci = [0.70, 0.73]", "efficiency_ci = [0.73, 0.70]", 8, "low <= high"),
        ("efficiency_ci = [0.70, 0.73]", "efficiency_ci = [0.70]", 8, "list of 2 numbers"),
        (f"bytes_moved = {BYTES}", "bytes_moved = 1.5", 12, "'bytes_moved' must be an integer"),
        ('source = "measured"', 'source = "guessed"', 14, "must be one of measured, reported"),
        ('cache = "cold"', 'cache = "cold"\ngrid = [0, 1, 1]', 14, "positive integers"),
        ("run_spread = 0.07", "run_sprad = 0.07", 9, "'run_sprad' is not a known key"),
        ("samples = 120", "samples = -3", 29, "'samples' must be >= 0"),
        ("samples = 120", 'samples = "many"', 29, "'samples' must be an integer"),
        ("samples = 120", "sample = 120", 29, "'sample' is not a known key"),
        ("schema = 1", "schema = 2", 1, "schema = 2 is not supported.*newer"),
        ('device = "mi300x"', 'device = "h100-sxm"', 2, 'file is for device "mi300x"'),
        ('device = "mi300x"\n', "", 1, "'device' is missing"),
    ],
)
def test_broken_entry_names_file_line_and_problem(tmp_path, old, new, line, message):
    assert old in VALID
    path = write(tmp_path, VALID.replace(old, new, 1))
    with pytest.raises(BaselineError, match=message) as caught:
        BaselineStore(tmp_path).load("mi300x")
    assert caught.value.path == str(path)
    assert caught.value.line == line, str(caught.value)


def test_duplicate_entries_name_both_lines(tmp_path):
    duplicate = VALID.replace(
        'id = "tests/perf/test_copy.py::test_copy"\nname = "copy"',
        f'id = "{TEST_ID}"\nname = "vector_add"',
    )
    write(tmp_path, duplicate)
    with pytest.raises(BaselineError, match=r"duplicate entry.*the first is at line 5") as caught:
        BaselineStore(tmp_path).load("mi300x")
    assert caught.value.line == 17


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
    store.save("mi300x", [make_entry(cache="hot", efficiency=3.2, efficiency_ci=(3.1, 3.3))])
    assert store.lookup("mi300x", TEST_ID, "vector_add").efficiency == 3.2


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = write(tmp_path, VALID)

    def broken_replace(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr(baseline.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        BaselineStore(tmp_path).save("mi300x", [make_entry(name="new")])
    assert path.read_text() == VALID
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mi300x.toml", "mi300x.toml.lock"]


def _save_then_hang(directory: str, ready) -> None:
    """Child: write the temporary file in full, then hang just before the rename."""

    def hang(source, destination):
        ready.set()
        time.sleep(60)

    baseline.os.replace = hang
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
        (f"tests/perf/test_w{w}.py::test_{r}", "vector_add") for w in range(8) for r in range(3)
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
    write(tmp_path, 'schema = 1\ndevice = "mi300x"\n')
    assert len(BaselineStore(tmp_path).load("mi300x")) == 0
