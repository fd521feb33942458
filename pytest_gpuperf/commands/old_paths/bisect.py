"""`python -m pytest_gpuperf.bisect`, the old path of `gpuperf bisect` (goes in the next
release): commands/old_paths/__init__.py."""

from pytest_gpuperf.commands.bisect import *  # noqa: F403

if __name__ == "__main__":
    from pytest_gpuperf.commands.old_paths import run_old_path

    run_old_path("bisect")
