"""FlashInfer's MLA layout (BatchMLAPagedAttentionWrapper) and its mapping to the FlashMLA layout
every amla recurrence reads.

FlashInfer                                         FlashMLA layout (amla._decode)
  q_nope [N, h, d_ckv], q_pe [N, h, d_kpe]           q  [batch, s_q, h, d_ckv + d_kpe]
    N = batch * s_q tokens, request b owning           = concat(q_nope, q_pe) reshaped; the tokens
    rows qo_indptr[b] .. qo_indptr[b+1] (uniform)      of request b are its s_q query tokens
  ckv [num_pages, page_size, d_ckv]                  kv [num_pages, page_size, 1, d_ckv + d_kpe]
  kpe [num_pages, page_size, d_kpe]                    = concat(ckv, kpe) with h_kv = 1; V is the
                                                       first d_v = d_ckv columns (the latent)
  kv_indptr [batch + 1], kv_indices [nnz]            block_table[b, i] = kv_indices[kv_indptr[b] + i]
                                                       for i < kv_indptr[b+1] - kv_indptr[b],
                                                       0 past it (never read)
  kv_len [batch]  (or last_page_len [batch])         seqlens[b] = kv_len[b]
                                                       (= (pages_b - 1) * page_size + last_page_len[b])
  out [N, h, d_ckv]                                  out [batch, s_q, h, d_v] reshaped
  lse [N, h], base 2                                 lse [batch, h, s_q] transposed, lse_base "2"
The causal mask is the same in both (aligned to the end of each sequence). Building the
FlashMLA q and kv concatenates, so it copies the query and the cache once.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import _amla
from ._decode import DecodeResult, run as _run_flashmla
from ._errors import invalid
from .formats import _np, _raw


def _i32(fn: str, arg: str, x) -> np.ndarray:
    """An index array as int32, refusing values that int32 cannot hold (no silent wrap)."""
    x = _np(x)
    if x.dtype == np.int32:
        return np.ascontiguousarray(x)
    if not np.issubdtype(x.dtype, np.integer):
        raise ValueError(invalid(fn, arg, f"dtype {x.dtype}", "must be an integer array"))
    if x.size and (x.min() < np.iinfo(np.int32).min or x.max() > np.iinfo(np.int32).max):
        raise ValueError(invalid(fn, arg, f"values in [{x.min()}, {x.max()}]", "must fit int32"))
    return np.ascontiguousarray(x.astype(np.int32))


def to_flashmla(q_nope, q_pe, ckv, kpe, kv_indptr, kv_indices, kv_len=None, *,
                last_page_len=None, qo_indptr=None) -> dict:
    """FlashInfer's tensors mapped to the FlashMLA layout (see the module comment) by the C++
    converter (problem/flashinfer_layout.hpp): a dict of q, kv, block_table, seqlens and d_v, the
    keywords of every amla recurrence."""
    fn = "amla.flashinfer.to_flashmla"
    q_nope, q_pe, ckv, kpe = _np(q_nope), _np(q_pe), _np(ckv), _np(kpe)
    if q_nope.ndim != 3 or q_pe.ndim != 3 or q_pe.shape[:2] != q_nope.shape[:2]:
        raise ValueError(invalid(fn, "q_pe", f"shape {q_pe.shape}",
                                 f"q_nope [N, h, d_ckv] = {q_nope.shape} and q_pe [N, h, d_kpe] "
                                 "must agree on N and h"))
    if ckv.ndim != 3 or kpe.ndim != 3 or kpe.shape[:2] != ckv.shape[:2]:
        raise ValueError(invalid(fn, "kpe", f"shape {kpe.shape}",
                                 f"ckv [num_pages, page_size, d_ckv] = {ckv.shape} and kpe "
                                 "[num_pages, page_size, d_kpe] must agree on pages and page_size"))
    if ckv.shape[2] != q_nope.shape[2] or kpe.shape[2] != q_pe.shape[2]:
        raise ValueError(invalid(fn, "ckv", f"shape {ckv.shape}",
                                 "d_ckv and d_kpe must match q_nope's and q_pe's"))
    if q_pe.dtype != q_nope.dtype:
        raise ValueError(invalid(fn, "q_pe", f"dtype {q_pe.dtype}",
                                 f"must be q_nope's dtype {q_nope.dtype}"))
    if kpe.dtype != ckv.dtype:
        raise ValueError(invalid(fn, "kpe", f"dtype {kpe.dtype}", f"must be ckv's dtype {ckv.dtype}"))
    if kv_len is None and last_page_len is None:
        raise ValueError(invalid(fn, "kv_len", "None", "kv_len or last_page_len is required"))
    kv_indptr = _i32(fn, "kv_indptr", kv_indptr)
    kv, block_table, seqlens = _amla._flashinfer_to_flashmla(
        _raw(ckv), _raw(kpe), kv_indptr,
        _i32(fn, "kv_indices", kv_indices),
        None if last_page_len is None else _i32(fn, "last_page_len", last_page_len),
        None if kv_len is None else _i32(fn, "kv_len", kv_len))
    batch = kv_indptr.size - 1
    n_tokens, heads = q_nope.shape[:2]
    if qo_indptr is None:
        if n_tokens % batch:
            raise ValueError(invalid(fn, "q_nope", f"{n_tokens} tokens",
                                     f"must be a multiple of batch = {batch}"))
        s_q = n_tokens // batch
    else:
        qo = np.asarray(_np(qo_indptr), dtype=np.int64)
        steps = np.diff(qo)
        if qo.shape != (batch + 1,) or qo[0] != 0 or steps.size == 0 or (steps != steps[0]).any() \
                or qo[-1] != n_tokens:
            raise ValueError(invalid(fn, "qo_indptr", str(qo.tolist()),
                                     "must be 0, s_q, 2 s_q, ... N: amla's DecodeShape has one s_q"))
        s_q = int(steps[0])
    q = _amla._concat_channels(_raw(q_nope), _raw(q_pe))
    return {"q": q.view(q_nope.dtype).reshape(batch, s_q, heads, -1),
            "kv": kv.view(ckv.dtype), "block_table": block_table, "seqlens": seqlens,
            "d_v": int(ckv.shape[2])}


def from_flashmla(q, kv, block_table, seqlens, *, d_v: int = 512) -> dict:
    """A FlashMLA-layout problem (h_kv = 1, V inside kv) in FlashInfer's layout, by the C++
    converter: q_nope, q_pe, ckv, kpe, kv_indptr, kv_indices, kv_len, last_page_len, qo_indptr
    (int32 tables)."""
    fn = "amla.flashinfer.from_flashmla"
    q, kv = _np(q), _np(kv)
    if kv.ndim != 4 or kv.shape[2] != 1:
        raise ValueError(invalid(fn, "kv", f"shape {kv.shape}",
                                 "must be [num_pages, page_size, 1, d_qk]: FlashInfer's MLA layout "
                                 "has one KV head"))
    seqlens = _i32(fn, "seqlens", seqlens)
    ckv, kpe, kv_indptr, kv_indices, last = _amla._flashmla_to_flashinfer(
        _raw(kv), _i32(fn, "block_table", block_table), seqlens, int(d_v))
    batch, s_q, heads, _ = q.shape
    q_nope, q_pe = _amla._split_channels(_raw(q), int(d_v))
    return {
        "q_nope": q_nope.view(q.dtype).reshape(batch * s_q, heads, d_v),
        "q_pe": q_pe.view(q.dtype).reshape(batch * s_q, heads, -1),
        "ckv": ckv.view(kv.dtype), "kpe": kpe.view(kv.dtype),
        "kv_indptr": kv_indptr, "kv_indices": kv_indices,
        "kv_len": seqlens.copy(), "last_page_len": last,
        "qo_indptr": (np.arange(batch + 1) * s_q).astype(np.int32),
    }


def outputs_to_flashinfer(out, lse):
    """out [batch, s_q, h, d_v] -> [batch * s_q, h, d_v] and lse [batch, h, s_q] -> [batch * s_q, h]."""
    b, s_q, h, d = out.shape
    lse_fi = None if lse is None else np.ascontiguousarray(np.swapaxes(lse, 1, 2)).reshape(b * s_q, h)
    return out.reshape(b * s_q, h, d), lse_fi


def run(recurrence: str, q_nope, q_pe, ckv, kpe, kv_indptr, kv_indices, kv_len=None, *,
        last_page_len=None, qo_indptr=None, lse_base: str = "2", **kw) -> DecodeResult:
    """Recurrence ``recurrence`` on FlashInfer's tensors; returns out [N, h, d_ckv] and lse
    [N, h] in FlashInfer's base 2 (lse_base="e" for natural log). Every other keyword is the
    FlashMLA-layout recurrence's (causal, softmax_scale, precision, ...); out= / lse= are not
    taken here (the layouts differ)."""
    p = to_flashmla(q_nope, q_pe, ckv, kpe, kv_indptr, kv_indices, kv_len,
                    last_page_len=last_page_len, qo_indptr=qo_indptr)
    d_v = p.pop("d_v")
    options = {k: kw.pop(k) for k in ("precision", "block_size", "compensation", "rescale",
                                       "exponent_clamp", "nudge", "n_cast", "skip_unmoved", "order",
                                       "num_splits")
               if k in kw}
    res = _run_flashmla(recurrence, d_v=d_v, lse_base=lse_base, options=options, **p, **kw)
    out, lse = outputs_to_flashinfer(res.out, res.lse)
    return DecodeResult(out, lse) if len(res) == 2 else type(res)(out, lse, res.report)


def golden(*args, **kw):
    """amla.golden on FlashInfer's layout (see run)."""
    return run("golden", *args, **kw)


def base(*args, **kw):
    """amla.base on FlashInfer's layout (see run)."""
    return run("base", *args, **kw)


def amla(*args, **kw):
    """amla.amla on FlashInfer's layout (see run)."""
    return run("amla", *args, **kw)
