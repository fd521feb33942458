"""Every command a failure prints is safe to paste into a shell, whatever the test ids and
folder names hold: the `update:` line quotes each word (shlex), and the `accept:` advice names
the test with a glob in which every character a shell or a commit message would read is `?`.
Before, a test id `'$(...)'` was printed unquoted in the accept advice: pasted, it ran.

Each printed command is run by bash in an empty folder with `printf` in pytest's place: the
words bash hands over must be the ones meant, and nothing may have run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from pytest_gpuperf.gate.accept import names, parse_rule

HOSTILE_IDS = [
    "$(touch PWNED1)",
    "`touch PWNED2`",
    "a'b;touch PWNED3",
    'q"$(touch PWNED4)"',
    "sp ace",
    "nl\nx",  # a line break: pytest's id says \n
]
HOSTILE = f"""
IDS = {HOSTILE_IDS!r}

@pytest.mark.parametrize("n", range(len(IDS)), ids=IDS)
def test_h(gpu_bench, n):
    add(gpu_bench)
"""
NODE_IDS = [f"test_perf.py::test_h[{name}]".replace("\n", "\\n") for name in HOSTILE_IDS]
FOLDER = "perf data $(touch PWNED5)"  # --gpuperf-baseline-dir, in the update line too


def pasted(words: str, tmp_path: Path) -> list[str]:
    """The words bash makes of `words` (pasted after a command), run in an empty folder;
    fails if anything in them ran."""
    folder = tmp_path / "paste"
    folder.mkdir(exist_ok=True)
    done = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {words}"],
        cwd=folder,
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert list(folder.iterdir()) == [], f"pasting ran a command: {words}"
    return done.stdout.decode().split("\0")[:-1]


def advice(lines: list[str], label: str) -> list[str]:
    return [line.split(f"{label}:", 1)[1].strip() for line in lines if f"  {label}: " in line]


def test_the_update_and_accept_lines_are_safe_to_paste(gp, tmp_path):
    gp.test_file(HOSTILE)
    gp.run("--gpuperf-save", f"--gpuperf-baseline-dir={FOLDER}").assert_outcomes(passed=6)
    gp.write_kernel(0.5)  # every test regresses
    result = gp.run("--gpuperf", f"--gpuperf-baseline-dir={FOLDER}")
    result.assert_outcomes(failed=6)
    lines = result.stdout.lines
    updates = sorted(set(advice(lines, "update")))
    accepts = sorted(set(advice(lines, "accept")))
    assert len(updates) == len(accepts) == len(NODE_IDS)

    named = set()
    for line in updates:
        command = line.split("   (if this slowdown")[0]
        assert command.startswith("pytest ")
        words = pasted(command.removeprefix("pytest "), tmp_path)
        assert words[:4] == [
            "--gpuperf",
            "--gpuperf-save",
            "--gpuperf-backend=sim",
            f"--gpuperf-baseline-dir={FOLDER}",
        ]
        assert len(words) == 5 and words[4] in NODE_IDS
        named.add(words[4])
    assert named == set(NODE_IDS)

    accepted = set()
    for line in accepts:
        trailer = re.search(r"a commit trailer 'Gpuperf-Accept: (\S+) <why>'", line)
        assert trailer is not None, line
        assert re.fullmatch(r"[\w./:\-\[\],=+@%?]+", trailer.group(1)), trailer.group(1)
        option = line.split(", or ", 1)[1].split(" (docs/ci.md")[0]
        (word,) = pasted(option, tmp_path)
        rule = parse_rule(word.removeprefix("--gpuperf-accept="), "--gpuperf-accept")
        assert rule.pattern == trailer.group(1)
        (test_id,) = [node for node in NODE_IDS if names(rule, node)]  # that test, no other
        accepted.add(test_id)
    assert accepted == set(NODE_IDS)
    assert not list(gp.path.rglob("PWNED*"))


def test_the_static_gates_record_line_is_quoted(gp):
    """The static gate's `record` command, from the same words (plugin/static_gate.py)."""
    from pytest_gpuperf.config.settings import Settings
    from pytest_gpuperf.plugin.state import PluginState
    from pytest_gpuperf.plugin.static_gate import StaticPlugin

    settings = Settings(
        static_archs=("gfx942",),
        clang="/opt/my clang/$(touch PWNED6)",
        baseline_dir=gp.path / FOLDER,
    )
    plugin = StaticPlugin(PluginState(settings, gp.path, None))
    command = plugin.update_command(NODE_IDS[0])
    words = pasted(command.removeprefix("pytest "), gp.path)
    assert words == [
        "--gpuperf-static=gfx942",
        "--gpuperf-save",
        "--gpuperf-clang=/opt/my clang/$(touch PWNED6)",
        f"--gpuperf-baseline-dir={FOLDER}",
        NODE_IDS[0],
    ]
