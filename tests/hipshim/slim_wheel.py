"""Write a copy of a hip-python wheel that holds only the HIP runtime and hiprtc bindings.

The cp312 hip-python wheels are ~67 MB, mostly hipBLAS/hipSPARSE/hipSOLVER bindings, which is
more than the device tool carries (64 MiB per call). hip/__init__.py imports every library
module inside `try: ... except ImportError`, so a wheel without them still imports
`hip.hip` and `hip.hiprtc` unchanged. The copy keeps the original file name and version
(pip then treats it as that release) and gets a RECORD of the files it still holds.

Usage: python tests/hipshim/slim_wheel.py WHEEL OUT_DIR
"""

from __future__ import annotations

import base64
import hashlib
import re
import sys
import zipfile
from pathlib import Path

# Binding modules of ROCm libraries other than the HIP runtime and hiprtc.
_DROPPED_MODULE = re.compile(r"^hip/c?(hipblas|hipsparse|hipsolver|hipfft|hiprand|rccl|roctx)[._]")
_SOURCES = (".pyx", ".pxd")


def kept(name: str) -> bool:
    return not (_DROPPED_MODULE.match(name) or name.endswith(_SOURCES))


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def slim(wheel: Path, out_dir: Path) -> Path:
    """The slim copy of `wheel` in `out_dir`, same file name."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / wheel.name
    if target.resolve() == wheel.resolve():
        raise SystemExit(f"{target}: choose an output folder other than the wheel's own")
    with (
        zipfile.ZipFile(wheel) as source,
        zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as result,
    ):
        record_name = next(n for n in source.namelist() if n.endswith(".dist-info/RECORD"))
        lines = []
        for info in source.infolist():
            if info.filename == record_name or not kept(info.filename):
                continue
            data = source.read(info)
            result.writestr(info, data)
            lines.append(_record_line(info.filename, data))
        lines.append(f"{record_name},,")
        result.writestr(record_name, "\n".join(lines) + "\n")
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    target = slim(Path(argv[0]), Path(argv[1]))
    print(f"{target} ({target.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
