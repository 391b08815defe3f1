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

from ._decode import BF16, DecodeResult, run as _run_flashmla
from ._errors import invalid


def _np(x) -> np.ndarray:
    """x as a numpy array; a torch bfloat16 tensor becomes an ml_dtypes.bfloat16 view."""
    if isinstance(x, np.ndarray):
        return x
    if str(getattr(x, "dtype", "")) == "torch.bfloat16":
        import torch  # only reached with a torch tensor in hand

        return x.detach().cpu().view(torch.int16).numpy().view(BF16)
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def to_flashmla(q_nope, q_pe, ckv, kpe, kv_indptr, kv_indices, kv_len=None, *,
                last_page_len=None, qo_indptr=None) -> dict:
    """FlashInfer's tensors mapped to the FlashMLA layout (see the module comment): a dict of q,
    kv, block_table, seqlens and d_v, the keywords of every amla recurrence."""
    fn = "amla.flashinfer.to_flashmla"
    q_nope, q_pe, ckv, kpe = _np(q_nope), _np(q_pe), _np(ckv), _np(kpe)
    kv_indptr = np.asarray(_np(kv_indptr), dtype=np.int64)
    kv_indices = np.asarray(_np(kv_indices), dtype=np.int64)
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
    if kv_indptr.ndim != 1 or kv_indptr.size < 2:
        raise ValueError(invalid(fn, "kv_indptr", f"shape {kv_indptr.shape}", "must be [batch + 1]"))
    batch = kv_indptr.size - 1
    page_size = ckv.shape[1]
    pages = np.diff(kv_indptr)
    if (pages < 0).any() or kv_indptr[0] != 0 or kv_indptr[-1] > kv_indices.size:
        raise ValueError(invalid(fn, "kv_indptr", str(kv_indptr.tolist()),
                                 f"must start at 0, not decrease, and end at most at "
                                 f"len(kv_indices) = {kv_indices.size}"))
    if kv_len is not None:
        seqlens = np.asarray(_np(kv_len), dtype=np.int64)
    elif last_page_len is not None:
        last = np.asarray(_np(last_page_len), dtype=np.int64)
        seqlens = np.where(pages > 0, (pages - 1) * page_size + last, 0)
    else:
        raise ValueError(invalid(fn, "kv_len", "None", "kv_len or last_page_len is required"))
    if seqlens.shape != (batch,):
        raise ValueError(invalid(fn, "kv_len", f"shape {seqlens.shape}", f"must be [batch = {batch}]"))
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
    max_pages = max(int(pages.max()), 1)
    block_table = np.zeros((batch, max_pages), dtype=np.int32)
    for b in range(batch):
        block_table[b, : pages[b]] = kv_indices[kv_indptr[b]: kv_indptr[b + 1]]
    q = np.concatenate([q_nope, q_pe], axis=-1).reshape(batch, s_q, heads, -1)
    kv = np.concatenate([ckv, kpe], axis=-1)[:, :, None, :]
    return {"q": q, "kv": kv, "block_table": block_table,
            "seqlens": seqlens.astype(np.int32), "d_v": int(ckv.shape[2])}


def from_flashmla(q, kv, block_table, seqlens, *, d_v: int = 512) -> dict:
    """A FlashMLA-layout problem (h_kv = 1, V inside kv) in FlashInfer's layout: q_nope, q_pe,
    ckv, kpe, kv_indptr, kv_indices, kv_len, last_page_len, qo_indptr (int32 tables)."""
    fn = "amla.flashinfer.from_flashmla"
    q, kv = _np(q), _np(kv)
    block_table, seqlens = np.asarray(block_table), np.asarray(seqlens)
    if kv.ndim != 4 or kv.shape[2] != 1:
        raise ValueError(invalid(fn, "kv", f"shape {kv.shape}",
                                 "must be [num_pages, page_size, 1, d_qk]: FlashInfer's MLA layout "
                                 "has one KV head"))
    batch, s_q, heads, _ = q.shape
    page_size = kv.shape[1]
    pages = (seqlens.astype(np.int64) + page_size - 1) // page_size
    kv_indptr = np.concatenate([[0], np.cumsum(pages)]).astype(np.int32)
    kv_indices = np.concatenate(
        [block_table[b, : pages[b]] for b in range(batch)] + [np.zeros(0, np.int32)]).astype(np.int32)
    last = np.where(pages > 0, seqlens - (pages - 1) * page_size, 0).astype(np.int32)
    return {
        "q_nope": np.ascontiguousarray(q[..., :d_v].reshape(batch * s_q, heads, d_v)),
        "q_pe": np.ascontiguousarray(q[..., d_v:].reshape(batch * s_q, heads, -1)),
        "ckv": np.ascontiguousarray(kv[:, :, 0, :d_v]),
        "kpe": np.ascontiguousarray(kv[:, :, 0, d_v:]),
        "kv_indptr": kv_indptr, "kv_indices": kv_indices,
        "kv_len": seqlens.astype(np.int32), "last_page_len": last,
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
                                       "exponent_clamp", "nudge", "n_cast", "order", "num_splits")
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
