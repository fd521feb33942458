"""The static gate's pytest layer (--gpuperf-static=ARCH): __init__.py registers a
`StaticPlugin` only when the option is on (pytest's junitxml model), and this file only wires
pytest; what
it shares with the timing gate (the run's state, the stash keys) is plugin/state.py's:

- session start: find clang for each arch (an arch clang does not know, or no clang that
  compiles for it, is a usage error: the gate was asked for and cannot act, so the run stops
  with exit 4 saying what was tried and what to install), validate baselines/static/<arch>.toml;
- each test using gpu_bench: after its body passed, every kernel it
  loaded is built and judged (gate/static/run.py, gate/static/gate.py) and a broken rule, a
  missing instruction or a build error fails it with the rendered message;
- the result travels in the test report (`report.gpuperf["static"]`, plain data), so the
  controller of an xdist run renders the terminal table and the Markdown section.

The simulated device runs the tests' data flow (so their own output checks still run);
nothing is timed.

It is also registered for a timing save (--gpuperf-save without --gpuperf-static): on a real
AMD GPU, each kernel whose measurement was saved has the facts of the code object the HIP
runtime actually loaded recorded in the same baselines/static/<arch>.toml (origin "loaded").
"""

from __future__ import annotations

import shlex
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf.errors import BaselineError, GpuPerfError, stop_words
from pytest_gpuperf.plugin.state import BENCH, FAILED_SUBTESTS, JUDGEMENT, PluginState

if TYPE_CHECKING:
    from pytest_gpuperf.gate.static.gate import StaticTestResult
    from pytest_gpuperf.gate.static.run import LaunchLog, StaticRun
    from pytest_gpuperf.record.meta import ReportMeta

PLUGIN_NAME = "gpuperf-static"
RESULT = pytest.StashKey["StaticTestResult"]()
LOADED_SAVES = pytest.StashKey[tuple[int, str]]()


class StaticPlugin:
    """The hooks of the static gate, and what the controller collects for the reports."""

    def __init__(self, state: PluginState) -> None:
        self.state = state
        self.settings = state.settings
        self.results: dict[str, StaticTestResult] = {}  # by test id: the last report wins
        self.loaded_saves: dict[str, tuple[int, str]] = {}  # a GPU save's staged entries
        self._static: StaticRun | None = None
        self._log: LaunchLog | None = None
        self.orphan_lines: list[str] = []  # the controller's, for the summary
        self.orphans: list[dict[str, str]] = []  # the same, for the JSON report

    @property
    def static(self) -> StaticRun:
        if self._static is None:
            from pytest_gpuperf.gate.static.run import StaticRun

            settings, session = self.settings, self.state.session
            self._static = StaticRun(
                archs=settings.static_archs,
                rootdir=self.state.rootdir,
                baseline_dir=settings.baseline_dir,
                clang=settings.clang,
                saving=settings.save,
                strict=settings.strict,
                compare_ref=settings.compare_ref,
                base_tree=session.base_tree,
                commit=lambda: session.git().stamp,
                update_command=self.update_command,
                timeout_s=settings.compile_timeout_s,
            )
        return self._static

    @property
    def log(self) -> LaunchLog:
        if self._log is None:
            from pytest_gpuperf.gate.static.run import LaunchLog

            self._log = LaunchLog()
        return self._log

    def update_command(self, *targets: str) -> str:
        """The exact command that records these tests' static facts."""
        settings = self.settings
        parts = ["pytest", f"--gpuperf-static={','.join(settings.static_archs)}", "--gpuperf-save"]
        if settings.clang:
            parts.append(f"--gpuperf-clang={settings.clang}")
        if settings.baseline_dir != self.state.rootdir / "baselines":
            from pytest_gpuperf.session.bench_session import relative

            parts.append(
                f"--gpuperf-baseline-dir={relative(settings.baseline_dir, self.state.rootdir)}"
            )
        return shlex.join([*parts, *targets])  # every word quoted for a shell

    def toolchain_labels(self) -> dict[str, str]:
        """'clang 19.1.7 (/usr/bin/clang-19), gpuperf HIP header' per arch."""
        return {
            arch: f"{clang.label} ({clang.path}), gpuperf HIP header"
            for arch, clang in self.static.toolchains().items()
        }

    # -- the session -----------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from pytest_gpuperf.gate.static.errors import StaticUnavailable, UnknownArch

        if not self.settings.static:
            return
        archs = ",".join(self.settings.static_archs)
        try:
            self.static.toolchains()
        except UnknownArch as unknown:
            raise pytest.UsageError(f"pytest-gpuperf: --gpuperf-static: {unknown}") from None
        except StaticUnavailable as missing:
            # asked for and unable to act: the run stops, loudly (a skip would read as green)
            raise pytest.UsageError(
                f"pytest-gpuperf: --gpuperf-static={archs}: the static gate cannot run: {missing}"
            ) from None
        try:
            self.static.check_files()
        except BaselineError as broken:
            raise pytest.UsageError(f"pytest-gpuperf: {broken}") from None

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if not self.settings.static:
            return []
        archs = ", ".join(self.settings.static_archs)
        compilers = sorted({clang.label for clang in self.static.toolchains().values()})
        lines = [
            f"gpuperf: static gate for {archs} with {', '.join(compilers)}; the SIMULATED device "
            "runs the tests' data flow; nothing is timed"
        ]
        if self.settings.compare_ref:
            ref = self.settings.compare_ref
            lines.append(f"gpuperf: kernels compared with their version at {ref}")
        else:
            lines.append(
                "gpuperf: kernels compared with the stored facts in "
                f"{self._relative(self.static.store.directory)}/<arch>.toml"
            )
        if self.settings.save:
            lines.append("gpuperf: saving the static facts (--gpuperf-save)")
        return lines

    # -- each test ---------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        """After the test body passed, build and judge every kernel it loaded (outermost
        wrapper: after plugin/verdict.py's timing gate, whose saves a GPU run's facts follow)."""
        if RESULT in item.stash:  # a rerun starts afresh
            del item.stash[RESULT]
        bench = item.stash.get(BENCH, None)
        if bench is not None and self.settings.static:
            self.log.clear()
            self.log.attach(bench.backend)
        result = yield  # a failed body (or timing gate) raises through: nothing judged
        failed_subtests: int = item.stash.get(FAILED_SUBTESTS, 0)
        if bench is None or failed_subtests:
            return result
        if not self.settings.static:  # a timing save: the loaded code objects' facts
            self._stage_loaded(item, bench)
            return result
        from pytest_gpuperf.gate.static.report import failure_message, junit_properties
        from pytest_gpuperf.gate.static.run import uses_of

        try:
            outcome = self.static.check(item.nodeid, uses_of(bench.loaded, self.log))
        except GpuPerfError as problem:  # a broken facts file, a missing clang
            pytest.fail(f"gpuperf: {problem}", pytrace=False)
        item.stash[RESULT] = outcome
        item.user_properties.extend(junit_properties(outcome))
        if outcome.failed:
            pytest.fail(failure_message(outcome), pytrace=False)
        return result

    def _stage_loaded(self, item: pytest.Item, bench: Any) -> None:
        """--gpuperf-save on a real AMD GPU: for each kernel whose measurement was saved,
        keep the facts of the code object the HIP runtime loaded (runtime/amd_codeobject.py
        reads it), at the launch shape it was measured with, for baselines/static/<arch>.toml.
        Nothing is timed or launched for this; a CUBIN or the simulated device has no AMD
        code object and stages nothing."""
        from pytest_gpuperf.gate.static.run import LaunchLog

        judgement = item.stash.get(JUDGEMENT, None)
        if judgement is None or bench.simulated:
            return
        saved = {m.kernel: m for m, v in judgement.verdicts if v.save is not None and v.save.saved}
        loaded = [(kernel, expect) for kernel, expect in bench.loaded if kernel.name in saved]
        if not loaded:
            return
        shapes = LaunchLog()
        for kernel, _ in loaded:
            measured = saved[kernel.name]
            if measured.block is not None:
                shapes.note(kernel, measured.block, measured.shared_bytes)
            elif kernel.resources.block_threads:
                shapes.note(kernel, kernel.resources.block_threads, 0)
        info = bench.info
        count = self.static.stage_loaded(
            item.nodeid,
            loaded,
            shapes,
            arch=info.arch,
            compiler=f"hiprtc {info.runtime_version}".strip(),
        )
        if count:
            item.stash[LOADED_SAVES] = (count, info.arch)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Add the static result to the test's report payload (outermost wrapper: after
        plugin/verdict.py has set it), as plain data for xdist."""
        report = yield
        outcome = item.stash.get(RESULT, None)
        loaded = item.stash.get(LOADED_SAVES, None)
        if call.when != "call" or (outcome is None and loaded is None):
            return report
        from pytest_gpuperf.engine.plain import to_plain

        payload = dict(getattr(report, "gpuperf", None) or {})
        if outcome is not None:
            payload["static"] = to_plain(outcome)
        if loaded is not None:
            payload["static_loaded"] = list(loaded)
        report.gpuperf = payload  # type: ignore[attr-defined]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "gpuperf", None)
        if report.when != "call" or not payload:
            return
        if "static_loaded" in payload:
            count, arch = payload["static_loaded"]
            self.loaded_saves[report.nodeid] = (int(count), str(arch))
        if "static" not in payload:
            return
        from pytest_gpuperf.engine.plain import from_plain
        from pytest_gpuperf.gate.static.gate import StaticTestResult

        self.results[report.nodeid] = from_plain(StaticTestResult, payload["static"])

    # -- the end -----------------------------------------------------------------------------
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the staged facts (each process its own, one locked merge per arch file)
        before plugin/finish.py (trylast) hands the problems to the controller and the exit
        code."""
        if self._static is None:
            return
        try:
            _, problems = self._static.flush_saves()
        except KeyboardInterrupt as stopped:  # Ctrl-C: stop saving, still report
            self.state.interrupted = True
            detail = f"{stopped}: not saved" if str(stopped) else f"interrupted ({stop_words()})"
            self.state.problems.append(f"{detail} (static facts); the file was left as it was")
            return
        self.state.problems += [str(problem) for problem in problems]
        if not hasattr(session.config, "workerinput"):
            self._find_orphans()

    def _find_orphans(self) -> None:
        """List (or with --gpuperf-prune remove) the stored static entries no test of this
        run produced, as plugin/finish.py does for the measured baselines."""
        if not (self.settings.static and self.results):
            return
        from pytest_gpuperf.baseline.orphans import RunTests
        from pytest_gpuperf.gate.static.orphans import find_static_orphans, prune_static

        produced: dict[str, set[tuple[str, str]]] = {}
        for test_id, result in self.results.items():
            produced.setdefault(test_id, set()).update((c.arch, c.name) for c in result.checks)
        store = self.static.store
        try:
            run = RunTests(self.state.collected, produced, whole=not self.state.narrowed)
            orphans = find_static_orphans(store, self.settings.static_archs, run)
            if orphans and self.settings.prune:
                for path, count in prune_static(store, orphans).items():
                    self.orphan_lines.append(
                        f"pruned {count} orphaned static entr{'ies' if count != 1 else 'y'} "
                        f"from {self._relative(path)}"
                    )
                return
        except GpuPerfError as problem:
            self.state.problems.append(f"orphaned static entries not checked: {problem}")
            return
        if not orphans:
            return
        self.orphan_lines.append(
            f"{len(orphans)} static entr{'ies' if len(orphans) != 1 else 'y'} no test of this "
            "run produced (a renamed or removed test or kernel?): --gpuperf-prune removes them"
        )
        for orphan in orphans:
            test_id, name = orphan.key
            self.orphans.append(
                {"test_id": test_id, "name": name, "arch": orphan.arch,
                 "path": self._relative(orphan.path), "why": orphan.why}
            )  # fmt: skip
        for shown in self.orphans[:20]:
            gone = "test not collected" if shown["why"] == "test" else "not checked by its test"
            self.orphan_lines.append(
                f"  orphan: {shown['test_id']} [{shown['name']}] in {shown['path']} ({gone})"
            )
        if len(orphans) > 20:
            self.orphan_lines.append(f"  ... and {len(orphans) - 20} more")

    def json(self) -> dict[str, Any]:
        """The static gate's part of the JSON report (`static`, docs/json-schema.md)."""
        from pytest_gpuperf.gate.static.report import static_json

        return static_json(
            self.results.values(), self.settings.static_archs, self.toolchain_labels(),
            self.orphans,
        )  # fmt: skip

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if hasattr(config, "workerinput"):
            return
        per_arch: dict[str, int] = {}
        for count, arch in self.loaded_saves.values():
            per_arch[arch] = per_arch.get(arch, 0) + count
        for arch, count in sorted(per_arch.items()):
            path = self._relative(self.static.store.path_for(arch))
            terminalreporter.write_line(
                f"gpuperf: saved the static facts of the loaded code objects of {count} kernel "
                f"entr{'ies' if count != 1 else 'y'} to {path}"
            )
        if not self.results:
            return
        from pytest_gpuperf.gate.static.report import terminal_lines

        archs = self.settings.static_archs
        terminalreporter.write_sep("=", f"gpuperf static gate ({', '.join(archs)})", bold=True)
        saved_to = {arch: self._relative(self.static.store.path_for(arch)) for arch in archs}
        results = list(self.results.values())
        lines = terminal_lines(
            results,
            archs,
            self.toolchain_labels(),
            saved_to=saved_to,
            record_command=self.update_command(),
        )
        for line in lines:
            failed = "FAILED" in line or "ERROR" in line
            terminalreporter.write_line(line, red=failed)
        from pytest_gpuperf.report.visible import visible

        for line in self.orphan_lines:  # test ids read from the static baseline files
            terminalreporter.write_line(f"gpuperf: {visible(line)}")

    def markdown(self, meta: ReportMeta | None = None) -> str:
        """The Markdown summary of a static run (plugin/finish.py writes it to
        --gpuperf-markdown)."""
        from pytest_gpuperf.gate.static.report import markdown_section

        return markdown_section(
            list(self.results.values()),
            self.settings.static_archs,
            self.toolchain_labels(),
            record_command=self.update_command(),
        )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        config.pluginmanager.unregister(self)

    def _relative(self, path: Path) -> str:
        from pytest_gpuperf.session.bench_session import relative

        return relative(path, self.state.rootdir)
