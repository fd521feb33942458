"""What the simulated device does instead of compiling: structure checks, directives, and
the code object a kernel's fingerprint is taken from.

No compiler runs. `check_source` fails where a compiler would fail first (with file:line);
`directives` reads the `// gpuperf-sim:` comments that set a kernel's modelled efficiency;
`code_object` is the simulated stand-in for a binary: the source with comments stripped and
whitespace collapsed, plus the headers it includes, the options and defines, and the
directives. Two sources that differ only in comments or layout give the same code object,
as they would give the same binary on a GPU.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.errors import CompileError
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.signature import KernelParam, parse_signatures

_LEXEME_RE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_LITERAL_SPLIT_RE = re.compile(r"(\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*')")
# A space that separates no two tokens: next to a bracket or separator, or between a word
# and an operator. Kept: word-word (`int x`) and operator-operator (`x - -y`).
_OPERATORS = r"+\-*/%&|^!~<>=.:?#"
_LOOSE_SPACE_RE = re.compile(
    rf"(?<=[^\w{_OPERATORS}]) | (?=[^\w{_OPERATORS}])"
    rf"|(?<=\w) (?=[{_OPERATORS}])|(?<=[{_OPERATORS}]) (?=\w)"
)
_KERNEL_TOKEN_RE = re.compile(r"\b(?:__global__|GPUPERF_KERNEL)\b")
_BOUNDS = r"(?:__launch_bounds__\s*\([^()]*\)\s*)?"
_KERNEL_DECL_RE = re.compile(rf"\s*{_BOUNDS}void\s+{_BOUNDS}[A-Za-z_]\w*\s*\(")
_FUNCTION_RE = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*\([^()]*\)\s*\{")
_INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(?P<name>[^"]+)"', re.M)
_DIRECTIVE_RE = re.compile(r"//[ \t]*gpuperf-sim:(?P<body>[^\n]*)")
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "catch"}
# Headers every compiler gets in memory (runtime/compile.py's portability_headers()).
BUILTIN_HEADERS = frozenset({"gpuperf.h", "hip/hip_runtime.h"})
SOURCE_SUFFIXES = (".hip", ".cu", ".cpp", ".cc", ".h")


@dataclass(frozen=True)
class SourceText:
    """A kernel source as read: its text, the name errors use, and the file when there is
    one (`path` is absolute; None for a source given as a string)."""

    text: str
    name: str
    path: Path | None

    @property
    def directory(self) -> Path | None:
        return self.path.parent if self.path is not None else None


def read_source(source: str | Path, name: str | None = None) -> SourceText:
    """A file (a Path, or a one-line string ending in a source suffix) or source text.

    A file that cannot be read or is not UTF-8 is a CompileError naming it, not an OSError
    or UnicodeDecodeError from deep inside the backend.
    """
    is_path = isinstance(source, Path) or ("\n" not in source and source.endswith(SOURCE_SUFFIXES))
    if not is_path:
        return SourceText(str(source), name or "<string>", None)
    path = Path(source)
    shown = name or str(path)
    return SourceText(read_text(path, shown), shown, path.resolve())


def read_text(path: Path, shown: str) -> str:
    """The UTF-8 text of `path`; CompileError naming `shown` (and the line of a bad byte)."""
    try:
        raw = path.read_bytes()
    except OSError as failure:
        raise CompileError(f"cannot read the kernel source: {failure}", source_path=shown) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as failure:
        line = raw.count(b"\n", 0, failure.start) + 1
        raise CompileError(
            f"the source is not UTF-8 text (byte {raw[failure.start]:#04x} at offset "
            f"{failure.start}); hiprtc and NVRTC read UTF-8: save the file as UTF-8",
            source_path=shown,
            line=line,
        ) from None


def _blank(text: str, *, strings: bool) -> str:
    """Comments (and string literals when `strings`) replaced by spaces, newlines kept."""

    def spaces(match: re.Match[str]) -> str:
        lexeme = match.group()
        if not strings and lexeme[0] in "\"'":
            return lexeme
        return re.sub(r"[^\n]", " ", lexeme)

    return _LEXEME_RE.sub(spaces, text)


def _blank_preprocessor(text: str) -> str:
    lines, continued = text.split("\n"), False
    for number, line in enumerate(lines):
        if continued or line.lstrip().startswith("#"):
            continued = line.rstrip().endswith("\\")
            lines[number] = " " * len(line)
    return "\n".join(lines)


class _Lines:
    def __init__(self, text: str) -> None:
        self.starts = [m.end() for m in re.finditer("\n", text)]

    def of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) + 1


def _header_places(directory: Path | None) -> list[Path]:
    return [p for p in (directory, KERNELS_DIR) if p is not None]


def check_source(
    text: str, source_name: str, directory: Path | None = None
) -> dict[str, tuple[KernelParam, ...]]:
    """The kernels' signatures, after the checks a compiler would fail first.

    Raises CompileError naming source:line for: an unterminated comment, unbalanced
    (), [] or {}, a quoted #include that cannot be found, a `__global__`/GPUPERF_KERNEL that
    is not `void name(...)`, and a source with no kernel at all.
    """
    lines = _Lines(text)

    def fail(message: str, offset: int) -> CompileError:
        return CompileError(message, source_path=source_name, line=lines.of(offset))

    no_comments = _blank(text, strings=False)
    if "/*" in (code := _blank(text, strings=True)):
        raise fail("unterminated /* comment", code.index("/*"))
    for include in _INCLUDE_RE.finditer(no_comments):
        header = include.group("name")
        places = _header_places(directory)
        if header not in BUILTIN_HEADERS and not any((p / header).is_file() for p in places):
            raise fail(f"'{header}' file not found", include.start())
    code = _blank_preprocessor(code)
    opened: list[tuple[str, int]] = []
    for bracket in re.finditer(r"[()\[\]{}]", code):
        char = bracket.group()
        if char in "([{":
            opened.append((char, bracket.start()))
        elif not opened or opened[-1][0] != _CLOSERS[char]:
            raise fail(
                f"unbalanced '{char}': no '{_CLOSERS[char]}' opened before it", bracket.start()
            )
        else:
            opened.pop()
    if opened:
        char, offset = opened[-1]
        raise fail(f"'{char}' is never closed", offset)
    for token in _KERNEL_TOKEN_RE.finditer(code):
        if not _KERNEL_DECL_RE.match(code, token.end()):
            raise fail(
                f"{token.group()} must declare a kernel as `{token.group()} void name(...)`",
                token.start(),
            )
    signatures = parse_signatures(text)
    if not signatures:
        function = next(
            (m for m in _FUNCTION_RE.finditer(code) if m.group("name") not in _KEYWORDS), None
        )
        where = f"function {function.group('name')!r} is not a kernel: " if function else ""
        raise fail(
            f"{where}no __global__ or GPUPERF_KERNEL kernel in the source; declare kernels as "
            '`GPUPERF_KERNEL void name(...)` after #include "gpuperf.h"',
            function.start() if function else 0,
        )
    return signatures


DIRECTIVE_SETTINGS = ("efficiency", "compute_efficiency")


def directives(text: str, source_name: str) -> dict[str, float]:
    """`// gpuperf-sim: efficiency=0.55` before a kernel sets that kernel's efficiency."""
    return _setting(text, source_name, "efficiency")


def compute_directives(text: str, source_name: str) -> dict[str, float]:
    """`// gpuperf-sim: compute_efficiency=0.4` before a kernel sets the fraction of the
    declared math type's peak FLOP/s it computes at (simulate/compute_time.py)."""
    return _setting(text, source_name, "compute_efficiency")


def _setting(text: str, source_name: str, wanted: str) -> dict[str, float]:
    """Each kernel's `wanted` setting of its gpuperf-sim directive (every setting checked)."""
    lines = _Lines(text)
    found: dict[str, float] = {}
    for directive in _DIRECTIVE_RE.finditer(text):
        line = lines.of(directive.start())
        following = parse_signatures(text[directive.end() :])
        if not following:
            raise CompileError(
                "a gpuperf-sim directive must precede the kernel it applies to",
                source_path=source_name,
                line=line,
            )
        kernel = next(iter(following))
        for item in directive.group("body").replace(",", " ").split():
            key, _, value = item.partition("=")
            if key not in DIRECTIVE_SETTINGS:
                raise CompileError(
                    f"unknown gpuperf-sim setting {item!r}; the settings are "
                    "efficiency=<0..1> and compute_efficiency=<0..1>",
                    source_path=source_name,
                    line=line,
                )
            try:
                efficiency = float(value)
            except ValueError:
                efficiency = math.nan
            if not 0 < efficiency <= 1:
                raise CompileError(
                    f"gpuperf-sim {key} must be a fraction in (0, 1], got {value!r}",
                    source_path=source_name,
                    line=line,
                )
            if key == wanted:
                found[kernel] = efficiency
    return found


# -- the simulated code object ----------------------------------------------------------------


@functools.lru_cache(maxsize=64)  # the same headers come with every kernel file
def normalise(text: str) -> str:
    """`text` as a compiler's output sees it: comments gone, whitespace only where it
    separates two tokens (`a + b` and `a+b` are one code; `x - -y` and `x--y` are not),
    string literals and preprocessor lines kept as they are apart from that."""
    code = _blank(text, strings=False)
    chunks: list[str] = []
    statements: list[str] = []
    for line in code.split("\n"):
        if line.lstrip().startswith("#"):  # a directive ends at its line's end
            chunks += [_squeeze(" ".join(statements)), _squeeze(line)]
            statements = []
        else:
            statements.append(line)
    chunks.append(_squeeze(" ".join(statements)))
    return "\n".join(chunk for chunk in chunks if chunk)


def _squeeze(code: str) -> str:
    pieces = _LITERAL_SPLIT_RE.split(code)  # code, literal, code, literal, ..., code
    for index in range(0, len(pieces), 2):
        piece = " ".join(pieces[index].split())
        piece = _LOOSE_SPACE_RE.sub("", piece)
        pieces[index] = piece.strip()
    return " ".join(piece for piece in pieces if piece)


def _included_headers(source: SourceText) -> list[tuple[str, str]]:
    """(include name, text) of every quoted header the source includes that exists beside
    it or among the plugin's kernels, recursively, each once, in order of first inclusion."""
    seen: dict[str, str] = {}
    pending = [(source.text, source.directory)]
    while pending:
        text, directory = pending.pop(0)
        for include in _INCLUDE_RE.finditer(_blank(text, strings=False)):
            header = include.group("name")
            if header in seen:
                continue
            path = next(
                (p / header for p in _header_places(directory) if (p / header).is_file()), None
            )
            if path is None:  # an in-memory header (hip/hip_runtime.h): the same everywhere
                continue
            seen[header] = read_text(path, str(path))
            pending.append((seen[header], path.parent))
    return list(seen.items())


def code_object(
    source: SourceText,
    kernel_directives: Mapping[str, float],
    options: Sequence[str] = (),
    defines: Mapping[str, str | int] | None = None,
    compute: Mapping[str, float] | None = None,
) -> bytes:
    """The simulated device's binary: what would change the compiled code, and only that.

    The normalised source and headers (a comment-only change leaves it alone), the compile
    options and defines (they change a real binary), and the gpuperf-sim directives (they
    are comments, but on the simulated device they stand for the code's speed).
    """
    parts = [normalise(source.text)]
    parts += [f"#header {name}\n{normalise(text)}" for name, text in _included_headers(source)]
    parts.append("#options " + " ".join(options))
    parts += [f"#define {k}={v}" for k, v in sorted((defines or {}).items())]
    parts += [f"#gpuperf-sim {k} efficiency={v!r}" for k, v in sorted(kernel_directives.items())]
    # compute_efficiency (the compute roof's speed) after them: a source without one keeps
    # the code object (and fingerprint) it had before the setting existed
    compute_items = sorted((compute or {}).items())
    parts += [f"#gpuperf-sim {k} compute_efficiency={v!r}" for k, v in compute_items]
    return "\n".join(parts).encode()


def fingerprint(binary: bytes, kernel: str) -> str:
    """The "sha256:<hex>" of a code object and a kernel name: equal only for the same kernel of
    byte-identical code (the form real backends use for their binaries)."""
    digest = hashlib.sha256(binary)
    digest.update(b"\0" + kernel.encode())
    return "sha256:" + digest.hexdigest()
