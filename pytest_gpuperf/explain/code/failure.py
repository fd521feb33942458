"""The explanation a failing verdict carries: the code facts of head and base and what
changed between them, as the plain `explain` object of the verdict (docs/json-schema.md):

    {"code": {"against": ..., "head": {...}, "base": {...}, "changes": [...],
              "unavailable": "", "advice": "", "cost_s": 0.4},
     "traffic": None, "bytes_check": None}

Only a FAIL that has a base is explained: an A/B regression (base: the build it was timed
against) and a stored-baseline regression (base: the commit the baseline was saved from,
built as the A/B builds its base, or the same code when the fingerprints agree). A fact that
cannot be had says why in `unavailable` (in a few words; the long way out, the same for every
failure of a run, goes in `advice`, which the run's notes say once); an explanation never
changes a verdict and never fails a test.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.errors import GpuPerfError, KernelNotFound
from pytest_gpuperf.explain import needs_explaining
from pytest_gpuperf.explain.code.code_diff import SAME_CODE, code_changes
from pytest_gpuperf.explain.code.code_facts import CodeFacts
from pytest_gpuperf.explain.code.cupy_facts import cupy_changes, cupy_facts
from pytest_gpuperf.explain.code.kernel_facts import FactsUnavailable, facts_of, first_line
from pytest_gpuperf.explain.code.triton_facts import triton_changes, triton_facts
from pytest_gpuperf.gate.decide import with_explanation
from pytest_gpuperf.record.verdict import Verdict
from pytest_gpuperf.runtime.base import Kernel
from pytest_gpuperf.session.bench_session import BenchSession
from pytest_gpuperf.session.fixture import GpuBench


def explain_verdicts(
    session: BenchSession,
    bench: GpuBench,
    verdicts: Sequence[tuple[Measurement, Verdict]],
    *,
    every: bool = False,
) -> tuple[tuple[Measurement, Verdict], ...]:
    """`verdicts` with each failure that has a base carrying its explanation; under `every`
    (--gpuperf-code-facts) each A/B measurement's too, failing or not."""
    out = []
    for measurement, verdict in verdicts:
        if needs_explaining(verdict) or (every and verdict.comparison is not None):
            started = time.perf_counter()
            code = _named_as_git_does(
                code_explanation(session, bench, measurement, verdict), session
            )
            code["cost_s"] = round(time.perf_counter() - started, 3)
            explain = dict(verdict.explain or {})
            explain["code"] = code
            explain.setdefault("traffic", None)
            explain.setdefault("bytes_check", None)
            verdict = with_explanation(verdict, explain)
        out.append((measurement, verdict))
    return tuple(out)


def _named_as_git_does(code: dict[str, Any], session: BenchSession) -> dict[str, Any]:
    """The explanation's words with each path as the repository names it: a file of an
    extracted revision as git's `<commit>:<path>`, a work-tree file relative to the rootdir.
    A compiler's message quotes the file it read by its absolute path, which put the runner's
    cache and checkout folders into the failure, the JSON and the Markdown summary (a pull
    request's comment: docs/ci.md says files are named relative to the repository)."""
    from pytest_gpuperf.runtime.compile import cache_dir

    trees = cache_dir() / "trees"
    tree_paths = {str(trees), str(trees.resolve())}
    root_paths = {str(session.rootdir), str(session.rootdir.resolve())}

    def named(text: str) -> str:
        for folder in tree_paths:
            text = re.sub(
                re.escape(folder + os.sep) + r"([0-9a-f]{7,64})" + re.escape(os.sep),
                lambda found: f"{found.group(1)[:12]}:",
                text,
            )
        for folder in root_paths:
            text = text.replace(folder + os.sep, "")
        return text

    for key in ("against", "unavailable", "advice"):
        if isinstance(code.get(key), str):
            code[key] = named(code[key])
    code["changes"] = [named(str(line)) for line in code.get("changes") or ()]
    return code


def code_explanation(
    session: BenchSession, bench: GpuBench, measurement: Measurement, verdict: Verdict
) -> dict[str, Any]:
    """The `code` part: head and base facts and the changes, or why there are none."""
    head_kernel, paired_base = bench.kernels_of(measurement.name)

    def facts(kernel: Kernel) -> CodeFacts:
        return facts_of(
            kernel,
            block=measurement.block,
            dynamic_shared_bytes=measurement.shared_bytes,
            compile_timeout_s=session.settings.compile_timeout_s,
        )

    if head_kernel is None:
        changed = verdict.comparison.changed_files if verdict.comparison is not None else ()
        if changed:
            return _callable_explanation(bench, measurement.name, changed)
        return _unavailable("", "the measurement is of a callable, not of a compiled kernel")
    against_stored = "regression" in verdict.failed_checks and "ab" not in verdict.failed_checks
    comparison = verdict.comparison
    if not against_stored and comparison is not None:
        against = f"the A/B base {comparison.ref} ({comparison.ref_commit[:12] or 'unresolved'})"
        if paired_base is None:
            why = f"no base build: {comparison.no_base_why or comparison.state}"
            try:
                return _explained(against, facts(head_kernel), None, [], unavailable=why)
            except FactsUnavailable as missing:
                return _unavailable(against, missing)
        base_kernel = paired_base
    else:
        ref = verdict.baseline.baseline
        assert ref is not None
        saved = f"the stored baseline ({ref.commit[:12] or 'no commit recorded'})"
        head_print = head_kernel.backend.kernel_fingerprint(head_kernel)
        if ref.fingerprint and ref.fingerprint == head_print:
            try:
                head = facts(head_kernel)
            except FactsUnavailable as missing:
                return _unavailable(saved, missing, changes=[_same_as_saved()])
            return _explained(saved, head, None, [_same_as_saved()])
        stored, why = _stored_base(session, head_kernel, ref.commit)
        if stored is None:
            try:
                head = facts(head_kernel)
            except FactsUnavailable as missing:
                return _unavailable(saved, FactsUnavailable(f"{why}; {missing}", missing.advice))
            return _explained(saved, head, None, [], unavailable=why)
        against = f"{saved}; {why}" if why else saved
        base_kernel = stored
    try:
        head = facts(head_kernel)
        base = facts(base_kernel)
    except FactsUnavailable as missing:
        return _unavailable(against, missing)
    return _explained(against, head, base, code_changes(base, head))


def _same_as_saved() -> str:
    return f"{SAME_CODE}: the same code the baseline was saved from (its fingerprint)"


def _stored_base(session: BenchSession, head: Kernel, commit: str) -> tuple[Kernel | None, str]:
    """The kernel as the baseline's commit had it, built like the A/B base, or why not."""
    module = head.module
    origin = module.origin_path or module.source_path
    if not commit:
        return None, "base code not available: the stored baseline records no commit"
    sha = commit.removesuffix("-dirty")
    dirty = "saved from a dirty tree: its code may not be the commit's" if sha != commit else ""
    if origin is None:
        return None, "base code not available: the kernel was not compiled from a file"
    from pytest_gpuperf.runtime.compile import cache_dir
    from pytest_gpuperf.session.base_tree import materialise

    tree = materialise(sha, session.rootdir, cache_dir() / "trees")
    if tree.note:  # the cached tree was changed, and extracted again: this one is git's
        dirty = "; ".join(filter(None, [dirty, tree.note]))
    if not tree.commit:
        return None, (
            f"base code not available: commit {sha[:12]}, which the baseline was saved from, is "
            f"not in this repository (a shallow clone? `git fetch --depth=1 origin "
            f"{shlex.quote(sha)}`)"
        )
    source, _, detail = tree.source_for(Path(origin))
    if source is None:
        return None, f"base code not available (stored baseline from {sha[:12]}): {detail}"
    try:
        base_module = session.module(source, module.options, dict(module.defines))
        return base_module.kernel(head.name), dirty
    except KernelNotFound:
        return None, f"base code not available: no kernel {head.name!r} at {sha[:12]}"
    except GpuPerfError as failure:
        why = first_line(failure)
        return None, f"base code not available (stored baseline from {sha[:12]}): {why}"


def _explained(
    against: str,
    head: CodeFacts,
    base: CodeFacts | None,
    changes: list[str],
    *,
    unavailable: str = "",
) -> dict[str, Any]:
    return {
        "against": against,
        "head": head.to_dict(),
        "base": base.to_dict() if base is not None else None,
        "changes": changes,
        "unavailable": unavailable,
        "advice": "",
    }


def _callable_explanation(bench: GpuBench, name: str, changed: Sequence[str]) -> dict[str, Any]:
    """A callable's `code`: the files that changed, the Triton and CuPy kernels each side
    compiled (explain/code/triton_facts.py, cupy_facts.py) and the kernels one call
    launches, head against base."""
    try:
        launches = bench.callable_launches(name)
    except Exception as failure:  # the user's callables: an explanation never fails a test
        launches = f"launches not counted: {type(failure).__name__}: {failure}"
    base = bench.callable_base_of(name)
    compiled: list[str] = []
    if base is not None:
        head, old = base.head_modules, base.base_modules
        compiled = triton_changes(triton_facts(head), triton_facts(old))
        compiled += cupy_changes(cupy_facts(head), cupy_facts(old))
    changes = [*([launches] if launches else []), *compiled]
    words = f"a callable: its Python changed at the base ({', '.join(changed)})"
    return _unavailable("", words, changes=changes)


def _unavailable(
    against: str, why: str | FactsUnavailable, *, changes: list[str] | None = None
) -> dict[str, Any]:
    return {
        "against": against,
        "head": None,
        "base": None,
        "changes": changes or [],
        "unavailable": str(why),
        "advice": why.advice if isinstance(why, FactsUnavailable) else "",
    }
