"""`python -m pytest_gpuperf.merge`, the old path of `gpuperf merge` (goes in the next
release): commands/old_paths/__init__.py."""

from pytest_gpuperf.commands.merge.__main__ import *  # noqa: F403

if __name__ == "__main__":
    from pytest_gpuperf.commands.old_paths import run_old_path

    run_old_path("merge")
