"""The commands' module paths before the `gpuperf` script, `python -m pytest_gpuperf.compare`
and the like, kept for one release and gone in the next.

The package's `__init__.py` adds this folder to its `__path__`, so each shim here is found as
`pytest_gpuperf.<command>` without being a name of the package's top level (whose names are
its layers). Run with -m, a shim says on stderr where its command went, then runs `gpuperf
<command>` with the same arguments: the same behaviour and exit status. Imported, it hands
on its command's public names.
"""

from __future__ import annotations

import sys
from typing import NoReturn


def notice(name: str) -> str:
    """The one line an old path prints before it runs."""
    return (
        f"python -m pytest_gpuperf.{name} is now `gpuperf {name}`; the old path goes away in "
        "the next release"
    )


def run_old_path(name: str) -> NoReturn:
    """`python -m pytest_gpuperf.<name> ARGS...`: the notice, then `gpuperf <name> ARGS...`."""
    from pytest_gpuperf.commands.gpuperf import main

    print(notice(name), file=sys.stderr, flush=True)
    sys.exit(main([name, *sys.argv[1:]]))
