"""Child-process entry point: read a pickled (compiler module, CompileRequest), compile, reply.

Replies on stdout with ("ok", (binary, log)) or ("error", (message, log)). A crash or a
hang of the compiler kills only this process; compile.py turns that into a CompileError.
"""

from __future__ import annotations

import importlib
import pickle
import sys

from pytest_gpuperf.runtime.compile import CompilerFailed


def main() -> None:
    module_name, request = pickle.loads(sys.stdin.buffer.read())
    compiler = importlib.import_module(module_name)
    try:
        reply = ("ok", compiler.compile(request))
    except CompilerFailed as failure:
        reply = ("error", (str(failure), failure.log))
    sys.stdout.buffer.write(pickle.dumps(reply))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
