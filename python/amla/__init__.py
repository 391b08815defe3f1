"""amla: the golden reference and simulator for Multi-head Latent Attention decode kernels.

Decode recurrences on the FlashMLA layout (see amla._decode for the layouts):

    out, lse = amla.golden(q, kv, block_table, seqlens)        # float64, the truth
    out, lse = amla.base(q, kv, block_table, seqlens)          # FlashAttention's online softmax
    out, lse, report = amla.amla(q, kv, block_table, seqlens)  # AMLA Algorithm 2 + its report
    amla.seesaw(...), amla.transposed(...), amla.split_kv(...)

Every recurrence takes the keywords

    v=None             separate V cache [num_pages, page_size, h_kv, d_v] (else V = kv[..., :d_v])
    d_v=None           head dim of V and out (512 when V lives in an MLA kv of d_qk 576)
    causal=False       mask aligned to the end: token t of s_q sees keys [0, seqlen - s_q + t]
    softmax_scale=None default 1 / sqrt(d_qk)
    out=None, lse=None caller arrays to write (numpy or DLPack); else new numpy arrays
    out_dtype=None     dtype of a new out: float32 (float64 for golden) by default; bfloat16
                       and that native type are written directly, others rounded once from it
    return_lse=True    False: lse is neither computed into an array nor returned
    round_output_bf16  round out to BF16 values as a kernel's output cast does
    round_output_fp16  round out to FP16 values as an FP16 kernel's output cast does
    threads=0          host threads (0 = all cores); results never depend on it
    rows_per_task=64   query rows per task (part of the result's definition)
    lse_base="e"       or "2": report lse in base 2
    empty_lse="-inf"   or "+inf" (FlashMLA): the lse of a row that attends no key
    kv_format="dense"  the cache's format, read as its kernel reads it: "flashmla_v32" /
                       "flashmla_model1" (FlashMLA FP8 bytes; page_size= for model1), "scaled"
                       (FP8 codes with kv_scales= and, for a separate V, v_scales=; fp8="e4m3" or
                       "e5m2", group_size=0 for one scale), "nz" (Ascend's NZ layout); FlashInfer's
                       split cache: amla.flashinfer
    indices=None       sparse top-k: [batch, s_q, topk] int32 positions in each sequence that
                       token t attends (-1 invalid; a duplicate counts twice; a position past
                       the keys the token may see is a ValueError)
    topk_length=None   [batch, s_q] (or [batch], one per sequence): entries of each list counted
    sink=None          [h_q] attention sink logits: each joins its head's softmax denominator;
                       lse stays the keys' alone (FlashMLA's convention)

and the kernel emulations (all but golden) take precision="bf16" (the kernel's BF16 operands and
casts), "fp16" (FP16 operands and P, FP32 accumulation: FlashMLA's and ETAP's FP16 kernels; not
AMLA, which is defined for BF16 only) or "float32" (no rounding anywhere) and block_size (keys per
KV block).

amla.cuda runs the CUDA backend on CUDA tensors (torch, through DLPack) when the package was
built with it (amla.cuda.available).
"""

from __future__ import annotations

from typing import Optional

from . import _amla
from ._conventions import AMLA_LSE, FLASHINFER_LSE, FLASHMLA_LSE, LseConvention, convert_lse
from ._decode import (BF16, CLAMP_DTYPE, VIOLATION_DTYPE, AmlaReport, AmlaResult, DecodeResult,
                      run)

__version__ = _amla.__version__

__all__ = [
    "golden", "base", "amla", "seesaw", "transposed", "split_kv", "run",
    "DecodeResult", "AmlaResult", "AmlaReport", "VIOLATION_DTYPE", "CLAMP_DTYPE", "BF16",
    "LseConvention", "AMLA_LSE", "FLASHMLA_LSE", "FLASHINFER_LSE", "convert_lse",
    "cases", "testing", "flashinfer", "formats", "sim", "mla", "cuda",
]


def golden(q, kv, block_table, seqlens, **kw) -> DecodeResult:
    """Float64 softmax attention (attention/golden.hpp): out and lse in float64 by default. The
    inputs are used exactly as given; a narrower out (float32, bfloat16) is rounded once from the
    float64 value."""
    return run("golden", q, kv, block_table, seqlens, **kw)


def base(q, kv, block_table, seqlens, *, precision: str = "bf16",
         block_size: Optional[int] = None, **kw) -> DecodeResult:
    """Base: FlashAttention's online softmax as a decode kernel computes it
    (attention/online_softmax.hpp); block_size defaults to 512."""
    return run("base", q, kv, block_table, seqlens,
               options={"precision": precision, "block_size": block_size}, **kw)


def amla(q, kv, block_table, seqlens, *, precision: str = "bf16",
         block_size: Optional[int] = None, compensation: str = "appendix_a",
         rescale: str = "hardware", exponent_clamp: Optional[int] = None,
         nudge: Optional[float] = None, n_cast: str = "toward_zero", skip_unmoved: bool = False,
         **kw) -> AmlaResult:
    """The AMLA recurrence (attention/amla.hpp): the output rescaled by an integer add on its FP32
    pattern. compensation "appendix_a" | "as_printed" | "none"; rescale "hardware" (the paper's
    clamped step and raw add; violations counted and located, clamp events counted) | "checked"
    (the same values, clamp events located too) | "safe" (the intended value where the add breaks
    Lemma 3.1, and the exact, unclamped step at a clamp event); exponent_clamp (default -30, in [-126, -24]),
    nudge (default 1e-6 in bf16, 0 in float32), n_cast "toward_zero" | "nearest_even";
    skip_unmoved True makes a step whose max did not move the identity (k = 0) instead of the
    nudge's drift (numeric/amla_step.hpp); block_size defaults to 512. Returns (out, lse, report)."""
    return run("amla", q, kv, block_table, seqlens,
               options={"precision": precision, "block_size": block_size,
                        "compensation": compensation, "rescale": rescale,
                        "exponent_clamp": exponent_clamp, "nudge": nudge, "n_cast": n_cast,
                        "skip_unmoved": skip_unmoved}, **kw)


def seesaw(q, kv, block_table, seqlens, *, precision: str = "bf16",
           block_size: Optional[int] = None, **kw) -> DecodeResult:
    """FlashMLA's seesaw schedule (attention/seesaw.hpp); block_size defaults to 64."""
    return run("seesaw", q, kv, block_table, seqlens,
               options={"precision": precision, "block_size": block_size}, **kw)


def transposed(q, kv, block_table, seqlens, *, precision: str = "bf16",
               block_size: Optional[int] = None, order: str = "forward", **kw) -> DecodeResult:
    """The transposed (ETAP) recurrence (attention/transposed.hpp); order "forward" | "reverse";
    block_size defaults to 64."""
    return run("transposed", q, kv, block_table, seqlens,
               options={"precision": precision, "block_size": block_size, "order": order}, **kw)


def split_kv(q, kv, block_table, seqlens, *, precision: str = "bf16",
             block_size: Optional[int] = None, num_splits: Optional[int] = None,
             **kw) -> DecodeResult:
    """Split-KV decoding with the lse combine (attention/split_kv.hpp): Base inside each of
    num_splits (default 4) key ranges; block_size defaults to 512."""
    return run("split_kv", q, kv, block_table, seqlens,
               options={"precision": precision, "block_size": block_size,
                        "num_splits": num_splits}, **kw)


from . import cases, flashinfer, formats, mla, sim, testing  # noqa: E402  (they use the functions above)
from . import cuda  # noqa: E402  (the CUDA backend when built with it; cuda.available says)
