"""The lines a run prints about what went wrong outside the gate: a file that could not be
written, a run stopped by Ctrl-C, the baseline files a save did not reach.

Each is one line that names what failed, the path, the errno's words and what to do, so a CI
log shows the cause without a Python traceback (docs/reliability.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pytest_gpuperf.errors import os_error_remedy, os_error_words, stop_words
from pytest_gpuperf.record.verdict import SAVE_NOT_MADE, Row


def os_fault_line(what: str, error: OSError, option: str) -> str:
    """'JSON report not written: out/r.json: No space left on device (ENOSPC); the disk ...'"""
    where = f"{error.filename}: " if error.filename else ""
    return f"{what}: {where}{os_error_words(error)}; {os_error_remedy(error, elsewhere=option)}"


def saved_lines(
    rows: Sequence[Row], unsaved: Mapping[str, str], where: Callable[[Path], str]
) -> list[str]:
    """What the saves of the run did, per file: 'saved 3 measurements to baselines/x.toml',
    or 'NOT saved: 3 measurements to baselines/x.toml (why)', then one line per test whose
    rows were not saved for a reason of its own (a crashed worker, an invalid entry, an entry
    missing when read back). `where` shortens a path."""
    saved: dict[str, int] = {}
    refused: dict[tuple[str, str], int] = {}
    own: list[str] = []
    for row in rows:
        save = row.verdict.save
        if save is None:
            continue
        if save.saved:
            saved[save.path] = saved.get(save.path, 0) + 1
        elif save.why_not in SAVE_NOT_MADE:
            because = _because(save.why_not, unsaved.get(save.path, ""), save.error)
            refused[(save.path, because)] = refused.get((save.path, because), 0) + 1
            if save.why_not in OWN_REASONS:
                own.append(f"  not saved: {row.test_id} [{row.measurement.name}]: {save.error}")
    lines = [f"saved {_count(n)} to {where(Path(path))}" for path, n in saved.items()]
    for (path, because), count in refused.items():
        lines.append(f"NOT saved: {_count(count)} to {where(Path(path))} ({because})")
    return lines + own


# Reasons a row was not saved that belong to the row (its worker, its entry), not to its file.
OWN_REASONS = ("invalid", "crashed", "missing")


def _because(why_not: str, file_reason: str, error: str) -> str:
    if why_not == "crashed":
        return "worker crashed"
    if why_not == "invalid":
        return "invalid entry, listed below"
    if why_not == "missing":
        return "not in the file when read back, listed below"
    if why_not == "interrupted" or file_reason.startswith("interrupted"):
        return _interrupted_words(file_reason or error)
    return "see the error below"


def _interrupted_words(reason: str) -> str:
    """'interrupted (Ctrl-C)' or 'interrupted (SIGTERM)', as the reason says."""
    return "interrupted (SIGTERM)" if "SIGTERM" in reason else "interrupted (Ctrl-C)"


def interrupted_line(rows: Sequence[Row], smoke: int, *, during_tests: bool) -> str:
    """The line of a run Ctrl-C stopped: what it measured, and what that cost."""
    tests = len({row.test_id for row in rows})
    if rows:
        measured = f"{_count(len(rows))} in {tests} test{'s' if tests != 1 else ''} taken (above)"
    elif smoke:
        measured = f"{smoke} gpu_bench call(s) launched in smoke mode"
    else:
        measured = "no measurement completed"
    saved = sum(1 for row in rows if row.verdict.save is not None and row.verdict.save.saved)
    if during_tests and not saved:
        lost = "the tests after them did not run and nothing was saved"
    elif during_tests:
        lost = (
            "the tests after them did not run; a baseline file is saved only where a line "
            "above says so (xdist workers that had finished their share saved it)"
        )
    else:
        lost = "a baseline file is saved only where a line above says so"
    return (
        f"interrupted ({stop_words()}): {measured}; {lost} (files not saved were left as they were)"
    )


def missing_baseline_dir_line(shown: str, *, strict: bool) -> str:
    """A measuring run's baseline folder that does not exist (`--gpuperf-baseline-dir=nope`,
    a CI typo): every test has "no baseline" and passes, which only the header's folder
    hinted at. A warning, or under --gpuperf-strict the reason the run stops."""
    what = (
        f"the baseline folder {shown} does not exist, so no test is judged against a stored "
        "baseline"
    )
    way_out = (
        "give the folder that holds them (--gpuperf-baseline-dir, gpuperf_baseline_dir), or "
        "record them there with --gpuperf-save"
    )
    if strict:
        return f"--gpuperf-strict stops the run: {what} (each test would fail on it); {way_out}"
    return f"{what}: a typo? {way_out}"


def collect_error_line(where: str, longrepr: str) -> str:
    """'test_b.py: ModuleNotFoundError: No module named 'nosuchmodule'': a file that could not
    be collected and the last line pytest gives for why (its `E   ` line)."""
    lines = [line.strip() for line in longrepr.splitlines() if line.strip()]
    errors = [line.removeprefix("E").strip() for line in lines if line.startswith("E ")]
    said = [line for line in errors if line and not line.startswith("HINT")] or errors
    why = (said or lines or ["no reason given"])[-1]
    return f"{where}: {why if len(why) <= 200 else why[:197] + '...'}"


def stopped_by_pytest_line(
    reason: str, collect_errors: Sequence[str], rows: Sequence[Row], smoke: int
) -> str:
    """The line of a run pytest itself stopped (errors during collection, `pytest.exit`):
    what stopped it, named, and what that cost; a collection error is not Ctrl-C."""
    shown = "; ".join(collect_errors[:3])
    if len(collect_errors) > 3:
        shown += f"; and {len(collect_errors) - 3} more"
    what = f"{reason} ({shown})" if shown else reason
    if rows or smoke:
        done = f"{_count(len(rows))} taken (above)" if rows else f"{smoke} smoke launch(es)"
        cost = f"{done}; the tests after it did not run and nothing was saved"
    else:
        cost = "no test ran: nothing was measured or saved"
    fix = (
        " (fix the file, or --continue-on-collection-errors runs the other tests)"
        if "during collection" in reason
        else ""
    )
    return f"pytest stopped the run: {what}; {cost}{fix}"


def _count(n: int) -> str:
    return f"{n} measurement{'s' if n != 1 else ''}"


def no_model_text(kernels: Sequence[tuple[str, str]], where: str, check: str) -> str:
    """Why an output check failed on the simulated device when a kernel it launched has no
    model: its outputs were never computed, so the check compared the buffers' old contents
    (said first: blaming the kernel, or in-place updates, would send the user the wrong way).
    `kernels` are (name, source file); `where` the failed check's file:line; `check` its
    message."""
    names = ", ".join(f"{name!r} of {source}" for name, source in kernels)
    name, source = kernels[0]
    lines = [
        "no model: outputs not computed: the simulated device has no model that computes the "
        f"outputs of kernel {names}, so it timed the launches but did not compute them: they "
        "kept what the "
        "buffers held (gpu_bench.empty fills them with NaN), and the output check below "
        "failed on that, not on your kernel. Register a model in a conftest.py:",
        "",
        "    from pytest_gpuperf import simulate",
        "",
        f"    @simulate.model({source!r}, {name!r})",
        f"    def {name}(args, launch):  # args in the kernel's order, as NumPy views",
        "        ...  # write the outputs, e.g. args[2][:] = args[0] + args[1]",
        "",
        '(docs/simulated-device.md, "Models of your kernels"), or run on a GPU.',
        "",
        f"The output check that failed{f' ({where})' if where else ''}:",
    ]
    shown = check.strip().splitlines() or ["(no message)"]
    if len(shown) > 20:
        shown = [*shown[:20], f"... ({len(shown) - 20} more lines)"]
    return "\n".join([*lines, *(f"    {line}" for line in shown)])
