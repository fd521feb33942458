"""Accepting an intended slowdown: which tests an accept rule names, and the rules a run has.

A rule is `PATTERN [reason]`: a glob of test ids (`*` any text, `?` one character:
`test_rmsnorm.py::*`, `*::test_copy[large]`, `test_scale[*]`) and why the slowdown is
intended. `[` and `]` are themselves, as in pytest's ids of parametrized tests, not fnmatch's
character class: the id a failure prints, pasted as it is, names that test (with fnmatch,
`test_scale[0]` named `test_scale0` and not the test). Rules come from --gpuperf-accept
(repeatable, one rule a value; the ini key `gpuperf_accept` holds one a line) and from
`Gpuperf-Accept: PATTERN <reason>` trailers of the pull request's own commits (which ones:
session/base_tree.py's accept_trailers), so the reason travels with the change that needs it
and a reviewer sees it in the diff. A trailer must give its reason; an option may leave it
out.

A confirmed regression of a test that a rule names is ACCEPTED (gate/decide.py): it passes,
and every report lists it with the rule's reason and origin. A rule that names no test of
the run is a warning (a typo would otherwise excuse nothing, silently), and so is one that
names too much, whatever its spelling (`too_broad`): any id at all (`*`, `*::*`, `?*`,
`*.py::*`), every measuring test of the run (`tests/*`), or more than a few and more than half
of them. A reason that is only the printed advice's placeholder (`<why>`) is no reason.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.record.verdict import Acceptance

TRAILER = "Gpuperf-Accept"
OPTION_SOURCE = "--gpuperf-accept"
INI_SOURCE = "gpuperf_accept (ini)"
TRAILER_SOURCE = f"{TRAILER} trailer"


# The advice a failure prints says `<why>` (docs say `<why the slowdown is intended>`): pasted
# without being filled in, it is no reason.
_PLACEHOLDER = re.compile(r"<[^<>]*>")
# Ids no suite has: a rule that names all of them names any id at all, whatever its spelling.
_ANY_IDS = (
    "a.py::b",
    "x/test_q.py::TestR::test_s[1-two words]",
    "test_z.py::test_z",
    "src/k.py::test_k",
)
FEW = 3  # a rule naming more tests than this, and more than half of the run's, warns


def parse_rule(text: str, source: str, *, commit: str = "") -> Acceptance:
    """One rule from 'PATTERN [reason]' (`ConfigError` naming `source` when empty); a reason
    that is only the advice's placeholder (`<why>`) is no reason."""
    words = text.strip().split(maxsplit=1)
    if not words:
        raise ConfigError(f"{source}: expected 'PATTERN [reason]' (a glob of test ids), got ''")
    reason = words[1].strip() if len(words) > 1 else ""
    if placeholder(reason):
        reason = ""
    return Acceptance(pattern=words[0], reason=reason, source=source, commit=commit)


def placeholder(reason: str) -> bool:
    """Whether `reason` is nothing but placeholders in angle brackets (`<why>`)."""
    return bool(reason.strip()) and not _PLACEHOLDER.sub("", reason).strip()


def option_rules(values: Iterable[str], source: str) -> tuple[Acceptance, ...]:
    """The rules of --gpuperf-accept (each value one rule: a newline in it is refused, it
    would smuggle a second rule, `$'x why\\n* sneaky'`) or of the ini key (one a line)."""
    rules = []
    for value in values:
        if source == OPTION_SOURCE and len(str(value).strip().splitlines()) > 1:
            raise ConfigError(
                f"{source}: one rule a value, got a line break in {str(value)!r}; repeat the "
                "option for another rule"
            )
        for line in str(value).splitlines():
            if not line.strip():
                continue
            words = line.split(maxsplit=1)
            if len(words) > 1 and placeholder(words[1]):
                raise ConfigError(
                    f"{source}: {line.strip()!r}: {words[1].strip()} is the advice's "
                    "placeholder: write why the slowdown is intended in its place (or give "
                    "the pattern alone)"
                )
            rules.append(parse_rule(line, source))
    return tuple(rules)


def trailer_rules(
    trailers: Sequence[tuple[str, str]],
) -> tuple[tuple[Acceptance, ...], tuple[str, ...]]:
    """(the rules, warnings) from (commit, trailer value) pairs; a trailer with no reason is
    refused with a warning: an accepted slowdown must say why."""
    rules, warnings = [], []
    for commit, value in trailers:
        if not value.strip():
            continue
        rule = parse_rule(value, TRAILER_SOURCE, commit=commit)
        if not rule.reason:
            given = value.split(maxsplit=1)[1:]
            what = f"gives only the placeholder {given[0].strip()}" if given else "gives no reason"
            warnings.append(
                f"{TRAILER}: {rule.pattern} in commit {commit[:12]} {what}: not "
                f"accepted (write '{TRAILER}: {rule.pattern} <why the slowdown is intended>')"
            )
            continue
        rules.append(rule)
    return tuple(rules), tuple(warnings)


def names(rule: Acceptance, test_id: str) -> bool:
    """Whether `rule` names the test `test_id` (case-sensitive glob, as pytest ids are;
    brackets are literal)."""
    return fnmatch.fnmatchcase(test_id, rule.pattern.replace("[", "[[]"))


def blanket(rule: Acceptance) -> bool:
    """Whether `rule` names every test whatever its id (`*`, `**`, `*::*`)."""
    return "*" in rule.pattern and not rule.pattern.strip("*:")


def blanket_line(rule: Acceptance) -> str:
    """The warning for a rule that accepts every test's regression."""
    return (
        f"accept rule '{rule.pattern}' ({rule.origin()}) names every test: any confirmed "
        "regression of this run is accepted by it; name the tests the change slows down "
        "(e.g. 'tests/perf/test_rmsnorm.py::*')"
    )


def too_broad(rule: Acceptance, test_ids: Iterable[str]) -> str:
    """The warning for a rule that names too much ("" when it does not), whatever its
    spelling: any id at all (`?*`, `*.py::*` name every id `*` does), every one of the run's
    measuring tests `test_ids` (more than one), or more than `FEW` and more than half of them:
    any confirmed regression among them would pass with one line of reason."""
    if blanket(rule) or all(names(rule, test_id) for test_id in _ANY_IDS):
        return blanket_line(rule)
    ids = set(test_ids)
    named = sum(1 for test_id in ids if names(rule, test_id))
    if len(ids) > 1 and named == len(ids):
        reach = f"names every measuring test of this run ({named})"
    elif named > FEW and 2 * named > len(ids):
        reach = f"names {named} of the run's {len(ids)} measuring tests"
    else:
        return ""
    return (
        f"accept rule '{rule.pattern}' ({rule.origin()}) {reach}: a confirmed regression of "
        "any of them is accepted by it; name the tests the change slows down (e.g. "
        "'tests/perf/test_rmsnorm.py::*')"
    )


def rule_for(rules: Sequence[Acceptance], test_id: str) -> Acceptance | None:
    """The first rule that names `test_id` (None: none does)."""
    return next((rule for rule in rules if names(rule, test_id)), None)


def unmatched(rules: Sequence[Acceptance], test_ids: Iterable[str]) -> list[Acceptance]:
    """The rules that name none of `test_ids` (the run's collected tests)."""
    ids = list(test_ids)
    return [rule for rule in rules if not any(names(rule, test_id) for test_id in ids)]


def unmatched_line(rule: Acceptance) -> str:
    """The warning for a rule that names no test of the run."""
    return (
        f"accept rule '{rule.pattern}' ({rule.origin()}) names no test of this run: nothing "
        "was accepted by it (a test id glob, e.g. 'test_rmsnorm.py::*')"
    )
