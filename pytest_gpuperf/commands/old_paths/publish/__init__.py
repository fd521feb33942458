"""`pytest_gpuperf.publish`, the old path of `gpuperf publish` (goes in the next release): a
package as the command was, so `pytest_gpuperf.publish.__main__` still imports
(commands/old_paths/__init__.py)."""
