"""The summary's warnings and notes about what a run did not do, or did around the gate:
accept rules that name no test or too much, the measuring tests a strict run's selection left
out, the revisions' trees found changed in the cache, a baseline folder that is not there, a
comparison run without its base. Each is a line (or none) for plugin/finish.py to print; the
controller gathers its workers' where they have them.
"""

from __future__ import annotations

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.plugin.state import PluginState


def accept_warnings(state: PluginState) -> tuple[str, ...]:
    """Accept rules that name no test of the run (a typo excuses nothing, silently otherwise),
    rules that name too much (every test, or most of the measuring ones), and Gpuperf-Accept
    trailers refused for want of a reason."""
    if not state.settings.measure:
        return ()
    from pytest_gpuperf.gate.accept import too_broad, unmatched, unmatched_line

    try:
        rules, refused = state.session.accept_rules()
    except GpuPerfError as problem:
        return (f"accept rules not read: {problem}",)
    measuring = {row.test_id for row in state.all_rows}
    return (
        *refused,
        *filter(None, (too_broad(rule, measuring) for rule in rules)),
        *(unmatched_line(r) for r in unmatched(rules, sorted(state.collected))),
    )


def deselected_warning(state: PluginState) -> tuple[str, ...]:
    """Under --gpuperf-strict, the measuring tests this run's selection left unmeasured,
    named: a strict gate that a `--deselect` in addopts (or a `-k`) narrowed said nothing of
    what it did not measure. --lf leaves the passed tests of a file uncollected rather than
    deselected: those with a stored baseline are named from the baseline file."""
    settings = state.settings
    if not (settings.strict and settings.measure):
        return ()
    from pytest_gpuperf.record.plural import counted
    from pytest_gpuperf.report.visible import visible

    names = list(state.deselected) + [
        test for test in _stored_but_not_collected(state) if test not in state.deselected
    ]
    if not names:
        return ()
    shown = ", ".join(visible(name) for name in names[:_NAMED])
    if len(names) > _NAMED:
        shown += f" and {len(names) - _NAMED} more"
    how = f" ({state.narrowed})" if state.narrowed else ""
    return (
        f"--gpuperf-strict names what it did not measure: {counted(len(names), 'measuring test')}"
        f" left out by this run's selection{how}: {shown}",
    )


def _stored_but_not_collected(state: PluginState) -> list[str]:
    """The tests of the measured devices' baseline files that a run narrowed by --lf or node
    ids did not collect (a run of whole files collects every test it could measure)."""
    if not any(way in state.narrowed for way in ("--lf", "node ids")) or not state.all_rows:
        return []
    from pytest_gpuperf.gate.judge import baseline_keys

    store = state.session.baselines()
    found: dict[str, None] = {}
    try:
        for key in dict.fromkeys(baseline_keys(row.measurement)[0] for row in state.all_rows):
            for entry in store.load(key).entries.values():
                if entry.test_id not in state.collected:
                    found[entry.test_id] = None
    except GpuPerfError:  # a file that cannot be read says so elsewhere
        return []
    return list(found)


_NAMED = 10  # deselected tests named before "and N more"


def tree_notes(state: PluginState) -> list[str]:
    """The revisions' trees this process found changed in the cache (session/base_tree.py),
    from the trees the run already made: none is extracted here."""
    opened, settings = state.opened_session, state.settings
    if opened is None or not (settings.measure or settings.static):
        return []
    trees = [opened.base_tree()] if settings.compare_ref else []
    trees += [opened.head_tree()] if settings.head_ref else []
    return [tree.note for tree in trees if tree.note]


def baseline_dir_warning(state: PluginState) -> tuple[str, ...]:
    """A measuring run whose baseline folder does not exist (collect.py stops a strict one)."""
    from pytest_gpuperf.report.faults import missing_baseline_dir_line
    from pytest_gpuperf.session.bench_session import relative

    if not state.missing_baseline_folder():
        return ()
    shown = relative(state.settings.baseline_dir, state.rootdir)
    return (missing_baseline_dir_line(shown, strict=False),)


def missing_base_line(state: PluginState) -> str:
    """Said once when --gpuperf-compare-missing-ok let a run go on without its base."""
    settings = state.settings
    if not (settings.compare_ref and settings.compare_missing_ok):
        return ""
    if not (settings.measure or settings.static) or state.session.base_tree().commit:
        return ""
    return (
        f"gpuperf: nothing was compared with {settings.compare_ref}: git cannot resolve it here, "
        "and --gpuperf-compare-missing-ok runs on without a base (every A/B is 'no base')"
    )
