"""baselines/static/<arch>.toml: round trips, merges under a lock from several processes,
file:line errors on hand edits, and the timing store never seeing it."""

from __future__ import annotations

import dataclasses
import multiprocessing
from pathlib import Path

import pytest

from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.baseline.store import lock_path_for
from pytest_gpuperf.errors import BaselineError, ConfigError
from pytest_gpuperf.gate.static import StaticFacts, with_occupancy
from pytest_gpuperf.gate.static.store import StaticEntry, StaticStore, parse, render

FACTS = with_occupancy(
    StaticFacts(
        kernel="vector_add",
        arch="gfx942",
        compiler="clang 19.1.7",
        hip_runtime="gpuperf",
        block_threads=256,
        dynamic_lds_bytes=0,
        vgprs=8,
        arch_vgprs=8,
        agprs=0,
        sgprs=14,
        static_lds_bytes=0,
        scratch_bytes=0,
        vgpr_spills=0,
        sgpr_spills=0,
        max_block_threads=1024,
        fingerprint="sha256:" + "ab" * 32,
        fingerprint_scope="kernel",
    )
)


@pytest.fixture(autouse=True)
def _own_lock_folder(tmp_path_factory, monkeypatch):
    """Save locks live in the machine's lock folder: each test gets its own."""
    monkeypatch.setenv("GPUPERF_LOCK_DIR", str(tmp_path_factory.mktemp("locks")))


def entry(test_id: str = "t.py::test_a", name: str = "vector_add", **facts) -> StaticEntry:
    return StaticEntry(
        test_id,
        name,
        with_occupancy(dataclasses.replace(FACTS, **facts)),
        source="kernels/vector_add.hip",
        when="2026-01-01T00:00:00Z",
        commit="abc",
    )


def test_save_and_load_round_trip_with_a_readable_file(tmp_path):
    store = StaticStore(tmp_path / "baselines")
    path = store.save("gfx942", [entry("t.py::test_b"), entry("t.py::test_a", vgprs=40)])
    assert path == tmp_path / "baselines" / "static" / "gfx942.toml"
    text = path.read_text()
    assert text.startswith("# pytest-gpuperf static facts for gfx942")
    assert text.index('id = "t.py::test_a"') < text.index('id = "t.py::test_b"')  # sorted
    assert "vgprs = 40\n" in text and 'origin = "clang"' in text
    loaded = store.load("gfx942")
    assert loaded.get("t.py::test_a", "vector_add").facts.vgprs == 40
    assert loaded.get("t.py::test_b", "vector_add") == entry("t.py::test_b")
    assert StaticStore(tmp_path / "baselines").load("gfx90a").entries == {}


def test_saving_merges_and_replaces_only_the_same_keys(tmp_path):
    store = StaticStore(tmp_path)
    store.save("gfx942", [entry("a"), entry("b")])
    store.save("gfx942", [entry("b", vgprs=24), entry("c")])
    entries = store.load("gfx942").entries
    assert sorted(entries) == [("a", "vector_add"), ("b", "vector_add"), ("c", "vector_add")]
    assert entries[("b", "vector_add")].facts.vgprs == 24


def _save_one(directory: str, index: int) -> None:
    StaticStore(directory).save("gfx942", [entry(f"t.py::test_{index}")])


def test_processes_saving_at_once_lose_nothing(tmp_path):
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_save_one, args=(str(tmp_path), i)) for i in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    assert len(StaticStore(tmp_path).load("gfx942").entries) == 6


def test_the_timing_store_never_sees_the_static_folder(tmp_path):
    StaticStore(tmp_path).save("gfx942", [entry()])
    assert BaselineStore(tmp_path).device_keys() == []


@pytest.mark.parametrize(
    ("edit", "line", "message"),
    [
        (("vgprs = 8", 'vgprs = "8"'), "vgprs", "static facts field 'vgprs' must be an integer"),
        (("vgprs = 8", "vgprz = 8"), "vgprz", "'vgprz' is not a known key"),
        (('\norigin = "clang"', '\norigin = "guess"'), "origin", "'origin' must be one of"),
        (("block_threads = 256", "block_threads = 0"), "block_threads", "must be at least 1"),
        (
            ('arch = "gfx942"\ncompiler', 'arch = "gfx90a"\ncompiler'),
            'arch = "gfx90a"',
            'is "gfx90a" in the file for "gfx942"',
        ),
        (('kernel = "vector_add"\n', ""), "[[entry]]", "static facts lack the field 'kernel'"),
        (("schema = 1", "schema = 3"), "schema", "schema = 3 is not supported"),
    ],
)
def test_a_broken_file_names_its_line(tmp_path, edit, line, message):
    store = StaticStore(tmp_path)
    path = store.save("gfx942", [entry()])
    old, new = edit
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(BaselineError) as raised:
        StaticStore(tmp_path).load("gfx942")
    lines = path.read_text().splitlines()
    expected = next(i + 1 for i, text in enumerate(lines) if text.startswith(line))
    assert raised.value.line == expected, (raised.value, expected)
    assert message in str(raised.value)


def test_duplicates_and_bad_toml_are_named(tmp_path):
    store = StaticStore(tmp_path)
    path = store.save("gfx942", [entry()])
    body = path.read_text().split("[[entry]]", 1)[1]
    path.write_text(path.read_text() + "\n[[entry]]" + body)
    with pytest.raises(BaselineError, match=r"duplicate entry for test 't\.py::test_a'"):
        store.load("gfx942")
    path.write_text("schema = \n")
    with pytest.raises(BaselineError, match="not valid TOML") as raised:
        store.load("gfx942")
    assert raised.value.line == 1


def test_a_broken_file_is_never_overwritten(tmp_path):
    store = StaticStore(tmp_path)
    path = store.save("gfx942", [entry()])
    path.write_text("schema = 1\narch = 'gfx942'\nentry = 3\n")
    before = path.read_bytes()
    with pytest.raises(BaselineError):
        store.save("gfx942", [entry("other")])
    assert path.read_bytes() == before


def test_no_path_is_followed_through_a_symbolic_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    folder = tmp_path / "baselines" / "static"
    folder.mkdir(parents=True)
    lock = lock_path_for(folder / "gfx942.toml")
    lock.unlink(missing_ok=True)
    lock.symlink_to(victim)
    with pytest.raises(BaselineError, match="symbolic link"):
        StaticStore(tmp_path / "baselines").save("gfx942", [entry()])
    assert victim.read_text() == "keep me"
    lock.unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder.rmdir()
    Path(folder).symlink_to(elsewhere)
    with pytest.raises(BaselineError, match="symbolic link"):
        StaticStore(tmp_path / "baselines").save("gfx942", [entry()])
    assert list(elsewhere.iterdir()) == []


def test_an_arch_that_cannot_name_a_file_or_facts_for_another_arch_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="cannot name a static facts file"):
        StaticStore(tmp_path).path_for("../gfx942")
    with pytest.raises(BaselineError, match="facts for gfx90a in the gfx942 file"):
        StaticStore(tmp_path).save("gfx942", [entry(arch="gfx90a")])


def test_render_and_parse_are_inverse():
    entries = [entry("a"), entry("b", vgprs=72, calls=("__ocml_rsqrt_f32",))]
    parsed = parse(render("gfx942", entries), "gfx942")
    assert list(parsed.values()) == entries


def test_an_invalid_new_entry_is_refused_before_writing(tmp_path):
    """A new entry the file's own reader would refuse is never written: the save parses
    what it rendered first (the check the timing store's save makes too)."""
    store = StaticStore(tmp_path)
    path = store.save("gfx942", [entry()])
    before = path.read_bytes()
    bad = dataclasses.replace(entry("t.py::test_b"), origin="guessed")
    with pytest.raises(BaselineError, match=r"not saved: a new entry is invalid: .*origin"):
        store.save("gfx942", [bad])
    assert path.read_bytes() == before


def test_static_orphans_follow_the_timing_stores_rule(tmp_path):
    """The rule of baseline/orphans.py over the static file: a test not collected (in a run
    that collected its file whole) or one that checked other kernels leaves orphans."""
    from pytest_gpuperf.baseline.orphans import RunTests
    from pytest_gpuperf.gate.static.orphans import find_static_orphans

    store = StaticStore(tmp_path)
    store.save("gfx942", [entry("t.py::gone"), entry("t.py::kept"), entry("t.py::renamed")])
    produced = {"t.py::kept": {("gfx942", "vector_add")}, "t.py::renamed": {("gfx942", "new")}}
    run = RunTests({"t.py::kept", "t.py::renamed"}, produced)
    found = {(o.key[0], o.why) for o in find_static_orphans(store, ["gfx942"], run)}
    assert found == {("t.py::gone", "test"), ("t.py::renamed", "kernel")}
    narrowed = dataclasses.replace(run, whole=False)
    found = {(o.key[0], o.why) for o in find_static_orphans(store, ["gfx942"], narrowed)}
    assert found == {("t.py::renamed", "kernel")}
