"""`python -m pytest_gpuperf.commands COMMAND ...`: the `gpuperf` console script, for a Python
whose scripts are not on PATH."""

import sys

from pytest_gpuperf.commands.gpuperf import main

if __name__ == "__main__":
    sys.exit(main())
