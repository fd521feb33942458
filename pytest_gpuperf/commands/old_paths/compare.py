"""`python -m pytest_gpuperf.compare`, the old path of `gpuperf compare` (goes in the next
release): commands/old_paths/__init__.py."""

from pytest_gpuperf.commands.compare import *  # noqa: F403

if __name__ == "__main__":
    from pytest_gpuperf.commands.old_paths import run_old_path

    run_old_path("compare")
