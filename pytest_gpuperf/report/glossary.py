"""The gate's own words, explained where they are printed: a run's output may say "prior",
"band", "A/A" or "module loads"; with -v, or when a check failed, the summary ends with one
line per word the run printed, so nobody has to look them up."""

from __future__ import annotations

import re
from collections.abc import Iterable

# (pattern found in the printed text, the word, what it means)
TERMS: tuple[tuple[str, str, str], ...] = (
    (
        r"\bband\b|±\d[\d.]*% (?:prior|history|pooled|tolerance)",
        "band",
        "the largest drop below the stored baseline that run-to-run noise alone explains; "
        "a drop beyond it (and beyond --gpuperf-tolerance) fails",
    ),
    (
        r"\bprior\b",
        "prior",
        "an assumed run-to-run spread (the backend's, or the file's other entries'), used "
        "until an entry has saves of its own; worth a few saves at most",
    ),
    (
        r"\bhistory\b",
        "history",
        "the band learned from this entry's own saves (--gpuperf-save, same code)",
    ),
    (
        r"\bpooled\b",
        "pooled",
        "the band learned from the spread of the baseline file's other entries of similar "
        "kernel time",
    ),
    (
        r"A/A",
        "A/A",
        "identical code compared with itself (head = base): how often noise alone would "
        "look like a change",
    ),
    (
        r"module loads?|\bloads per side\b",
        "module load",
        "one loading of a compiled kernel into the GPU; head and base are each loaded several "
        "times, so a difference that belongs to one load (code placement) is measured, "
        "not mistaken for the code's",
    ),
)


def glossary_lines(texts: Iterable[str]) -> list[str]:
    """'words: band = ...' lines for the terms that occur in `texts`, in a fixed order."""
    printed = "\n".join(texts)
    return [
        f"words: {word} = {meaning}"
        for pattern, word, meaning in TERMS
        if re.search(pattern, printed)
    ]
