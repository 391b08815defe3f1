"""lse conventions (problem/conventions.hpp) and the converter between them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from . import _amla
from ._errors import invalid


@dataclass(frozen=True)
class LseConvention:
    """How an lse tensor is reported: its logarithm base and its value for a row that attends no
    key. ``base`` is ``"e"`` (natural log) or ``"2"``; ``empty`` is ``"-inf"`` (the log of the
    empty sum: amla, split-KV partials) or ``"+inf"`` (FlashMLA's and FlashAttention's final
    output)."""

    base: str = "e"
    empty: str = "-inf"

    def __post_init__(self) -> None:
        if self.base not in ("e", "2"):
            raise ValueError(invalid("amla.LseConvention", "base", repr(self.base), "must be 'e' or '2'"))
        if self.empty not in ("-inf", "+inf"):
            raise ValueError(
                invalid("amla.LseConvention", "empty", repr(self.empty), "must be '-inf' or '+inf'")
            )


#: amla's own outputs: natural log, -inf for empty rows.
AMLA_LSE = LseConvention("e", "-inf")
#: FlashMLA's final output: natural log, +inf for empty rows.
FLASHMLA_LSE = LseConvention("e", "+inf")
#: FlashInfer's MLA output: base 2 (FlashInfer reports lse / ln 2); empty rows as amla's -inf.
FLASHINFER_LSE = LseConvention("2", "-inf")

_NAMED = {"amla": AMLA_LSE, "flashmla": FLASHMLA_LSE, "flashinfer": FLASHINFER_LSE}

ConventionLike = Union[LseConvention, str, tuple]


def as_convention(c: ConventionLike, fn: str, arg: str) -> LseConvention:
    """An LseConvention from an instance, a name ("amla", "flashmla", "flashinfer") or a
    (base, empty) pair."""
    if isinstance(c, LseConvention):
        return c
    if isinstance(c, str) and c in _NAMED:
        return _NAMED[c]
    if isinstance(c, tuple) and len(c) == 2:
        return LseConvention(str(c[0]), str(c[1]))
    raise ValueError(
        invalid(fn, arg, repr(c), "must be an LseConvention, 'amla', 'flashmla', 'flashinfer' "
                "or a (base, empty) pair")
    )


def convert_lse(lse, from_: ConventionLike = "amla", to: ConventionLike = "flashmla") -> np.ndarray:
    """lse converted between conventions by problem/conventions.hpp's ``convert_lse``: an
    infinite value (either sign) is an empty row and becomes the target's marker, NaN stays NaN,
    finite values are rescaled between bases. Returns a new float32 or float64 array (float32
    input stays float32; anything else is read as float64)."""
    src = as_convention(from_, "amla.convert_lse", "from_")
    dst = as_convention(to, "amla.convert_lse", "to")
    a = np.asarray(lse)
    out = np.array(a, dtype=np.float32 if a.dtype == np.float32 else np.float64, order="C", copy=True)
    _amla._convert_lse_inplace(out, src.base, src.empty, dst.base, dst.empty)
    return out
