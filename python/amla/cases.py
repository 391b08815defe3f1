"""Random, valid, reproducible decode problems from attention::ProblemBuilder
(attention/problem_builder.hpp), in the FlashMLA layout or the FlashInfer one.

    case = amla.cases.build(batch=2, h_q=16, seqlens=[1000, 0], seed=7)
    out, lse = amla.golden(**case.inputs())
    fi = case.flashinfer()          # q_nope, q_pe, ckv, kpe, kv_indptr, kv_indices, kv_len, ...

Values are drawn from N(0, s^2) or U(-a, a) and rounded to BF16 (a float32 case too, unless
round_to_bf16=False); page ids are shuffled; with poison_unused (default) every unused page, every
slot past a sequence's end and every unused block_table entry holds garbage (NaN in the caches, an
out-of-range page id in the table), so a kernel that reads them is caught. A seed gives the same
problem on every platform, and the values do not depend on the paging.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple

import numpy as np

from . import _amla
from ._decode import BF16
from ._errors import invalid


@dataclass
class Case:
    """A decode problem in the FlashMLA layout (amla._decode), with the options it was built for.
    bf16 tensors are ml_dtypes.bfloat16 arrays."""

    q: np.ndarray
    kv: np.ndarray
    v: Optional[np.ndarray]
    block_table: np.ndarray
    seqlens: np.ndarray
    d_v: int
    causal: bool = False
    softmax_scale: Optional[float] = None
    seed: int = 0
    params: dict = field(default_factory=dict)

    def inputs(self) -> dict:
        """Keyword arguments of every recurrence: amla.golden(**case.inputs())."""
        return {"q": self.q, "kv": self.kv, "v": self.v, "block_table": self.block_table,
                "seqlens": self.seqlens, "d_v": self.d_v, "causal": self.causal,
                "softmax_scale": self.softmax_scale}

    @property
    def shape(self) -> dict:
        """The DecodeShape fields."""
        b, s_q, h_q, d_qk = self.q.shape
        num_pages, page_size, h_kv, _ = self.kv.shape
        return {"batch": b, "s_q": s_q, "h_q": h_q, "h_kv": h_kv, "d_qk": d_qk, "d_v": self.d_v,
                "num_pages": num_pages, "page_size": page_size,
                "max_pages_per_seq": self.block_table.shape[1]}

    def flashinfer(self) -> dict:
        """The same problem in FlashInfer's MLA layout (amla.flashinfer.from_flashmla)."""
        from . import flashinfer

        return flashinfer.from_flashmla(self.q, self.kv, self.block_table, self.seqlens, d_v=self.d_v)


def build(*, batch: Optional[int] = None, s_q: int = 1, h_q: int = 128, h_kv: int = 1, d_qk: int = 576,
          d_v: int = 512, page_size: int = 64, seqlens: Optional[Sequence[int]] = None,
          random_seqlens: Optional[Tuple[int, int]] = None, separate_v: bool = False,
          distribution: Tuple[str, float] = ("normal", 1.0),
          q_distribution: Optional[Tuple[str, float]] = None,
          kv_distribution: Optional[Tuple[str, float]] = None, seed: int = 0x5EED,
          shuffle_pages: bool = True, spare_pages: int = 1, extra_table_columns: int = 1,
          poison_unused: bool = True, round_to_bf16: bool = True, dtype: str = "bf16",
          causal: bool = False, softmax_scale: Optional[float] = None) -> Case:
    """A random decode problem (ProblemBuilder). ``seqlens``: one length for every sequence or
    one per sequence (default 1024; ``batch`` defaults to their count, else 1); ``random_seqlens=(lo, hi)``:
    lengths drawn uniformly from [lo, hi] (zero lengths allowed). ``distribution``: ("normal", s)
    or ("uniform", a) for Q, K and V, overridden per tensor by q_distribution / kv_distribution.
    ``dtype``: "bf16" (ml_dtypes.bfloat16 arrays) or "float32". ``causal`` and ``softmax_scale``
    are recorded in the case for inputs()."""
    lens = None if seqlens is None else [int(x) for x in np.atleast_1d(seqlens)]
    if lens is None and random_seqlens is None:
        lens = [1024]
    if batch is None:
        batch = len(lens) if lens and random_seqlens is None else 1
    elif lens is not None and len(lens) > 1 and len(lens) != batch and random_seqlens is None:
        raise ValueError(invalid("amla.cases.build", "seqlens", f"{len(lens)} lengths",
                                 f"must hold one length (used for every sequence) or batch = {batch}"))
    d = _amla._build_problem(
        batch=batch, s_q=s_q, h_q=h_q, h_kv=h_kv, d_qk=d_qk, d_v=d_v, page_size=page_size,
        seqlens=lens, random_seqlens=None if random_seqlens is None else tuple(random_seqlens),
        separate_v=separate_v,
        q_distribution=tuple(q_distribution or distribution),
        kv_distribution=tuple(kv_distribution or distribution),
        seed=int(seed), shuffle_pages=shuffle_pages, spare_pages=spare_pages,
        extra_table_columns=extra_table_columns, poison_unused=poison_unused,
        round_to_bf16=round_to_bf16, dtype=dtype)
    as_elem = (lambda a: a.view(BF16)) if dtype == "bf16" else (lambda a: a)
    params = {k: val for k, val in dict(
        batch=batch, s_q=s_q, h_q=h_q, h_kv=h_kv, d_qk=d_qk, d_v=d_v, page_size=page_size,
        seqlens=lens, random_seqlens=random_seqlens, separate_v=separate_v,
        distribution=list(distribution), q_distribution=q_distribution,
        kv_distribution=kv_distribution, shuffle_pages=shuffle_pages, spare_pages=spare_pages,
        extra_table_columns=extra_table_columns, poison_unused=poison_unused,
        round_to_bf16=round_to_bf16, dtype=dtype).items()}
    return Case(q=as_elem(d["q"]), kv=as_elem(d["kv"]),
                v=None if d["v"] is None else as_elem(d["v"]),
                block_table=d["block_table"], seqlens=d["seqlens"], d_v=int(d["d_v"]),
                causal=causal, softmax_scale=softmax_scale, seed=int(seed), params=params)


def deepseek_mla(batch: int, seqlen: int, **kw) -> Case:
    """DeepSeek-V3 MLA decode: h_q 128, h_kv 1, d_qk 576, d_v 512 (V in the K cache), page 64."""
    return build(batch=batch, h_q=128, h_kv=1, d_qk=576, d_v=512, page_size=64,
                 seqlens=[seqlen], **kw)
