"""Number formats and KV cache layouts decode kernels use (numeric/fp16.hpp, numeric/fp8.hpp,
problem/fp8_cache.hpp, problem/nz_layout.hpp), on numpy arrays.

Casts (exact; the inputs of a narrowing are float32, or float16 / bfloat16 widened exactly):

    to_fp16(x) -> float16              from_fp16(h) -> float32
    to_fp8(x, fmt="e4m3", saturate=False) -> uint8 codes       from_fp8(codes, fmt) -> float32
    to_e8m0(x, rounding="nearest", saturate=False) -> uint8    from_e8m0(codes) -> float32

FP8 codes are uint8; ml_dtypes' float8_e4m3fn / float8_e5m2 / float8_e8m0fnu arrays are accepted
wherever codes are (``codes.view(ml_dtypes.float8_e4m3fn)`` turns the result into one). Without
saturation an overflow is NaN (e4m3, e8m0) or Inf (e5m2), as ml_dtypes and torch convert; with it,
the largest finite value. e8m0 rounds to the nearest power of two (the midpoint going up), "up"
(the smallest power >= x) or "down".

FP8 KV caches:

    quantize_flashmla(kv, layout="v32")          BF16 kv [pages, page_size, 1, 576 | 512] -> bytes
    dequantize_flashmla(cache, layout="v32", page_size=None, dtype="bfloat16") -> kv
    quantize_scaled(kv, fp8="e4m3", group_size=0, scale=None) -> (codes, scales)   vLLM / FlashInfer
    dequantize_scaled(codes, scales, fp8="e4m3", group_size=0, dtype="float32") -> kv
    tensor_scale(x, fp8="e4m3")                   amax / FP8 max over the non-NaN values
    quantization_error(reference, dequantized)    float64 error report (a dict)

Layouts: to_nz(kv, c0=None) / from_nz(nz) (Ascend's NZ), and amla.flashinfer for FlashInfer's.
"""

from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np

from . import _amla
from ._decode import BF16
from ._errors import invalid

_FP8_DTYPES = {
    np.dtype(ml_dtypes.float8_e4m3fn): "e4m3",
    np.dtype(ml_dtypes.float8_e5m2): "e5m2",
    np.dtype(ml_dtypes.float8_e8m0fnu): "e8m0",
}


def _np(x) -> np.ndarray:
    """x as a numpy array; a torch tensor goes through numpy (bfloat16 as its bits)."""
    if isinstance(x, np.ndarray):
        return x
    if str(getattr(x, "dtype", "")) == "torch.bfloat16":
        import torch  # only reached with a torch tensor in hand

        return x.detach().cpu().view(torch.int16).numpy().view(BF16)
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _float32(fn: str, arg: str, x) -> np.ndarray:
    """x as float32, accepting only dtypes that widen to it exactly."""
    x = _np(x)
    if x.dtype == np.float32:
        return np.ascontiguousarray(x)
    if x.dtype in (np.float16, BF16) or x.dtype in _FP8_DTYPES:
        return np.ascontiguousarray(x.astype(np.float32))
    raise ValueError(invalid(fn, arg, f"dtype {x.dtype}",
                             "must be float32 (or float16 / bfloat16, widened exactly); convert "
                             "wider types explicitly, a second rounding would change the result"))


def _float_or_bf16(fn: str, arg: str, x) -> np.ndarray:
    """x as the extension reads it: bfloat16 as its uint16 bits, anything else as float32."""
    x = _np(x)
    if x.dtype == BF16:
        return np.ascontiguousarray(x).view(np.uint16)
    return _float32(fn, arg, x)


def _codes(fn: str, arg: str, x, fmt: str) -> np.ndarray:
    """FP8 / e8m0 codes as uint8: uint8 itself, or the ml_dtypes type of format fmt."""
    x = _np(x)
    if x.dtype in _FP8_DTYPES:
        if _FP8_DTYPES[x.dtype] != fmt:
            raise ValueError(invalid(fn, arg, f"dtype {x.dtype}", f"must hold {fmt} codes"))
        return np.ascontiguousarray(x).view(np.uint8)
    if x.dtype != np.uint8:
        raise ValueError(invalid(fn, arg, f"dtype {x.dtype}",
                                 f"must be uint8 {fmt} codes (or the ml_dtypes {fmt} type)"))
    return np.ascontiguousarray(x)


def _bf16_bits(fn: str, arg: str, x) -> np.ndarray:
    x = _np(x)
    if x.dtype == BF16:
        return np.ascontiguousarray(x).view(np.uint16)
    if x.dtype == np.uint16:
        return np.ascontiguousarray(x)
    raise ValueError(invalid(fn, arg, f"dtype {x.dtype}",
                             "must be bfloat16 (ml_dtypes) or uint16 BF16 bits"))


# ---- casts --------------------------------------------------------------------------------------

def to_fp16(x) -> np.ndarray:
    """x rounded to nearest-even FP16 (IEEE: overflow to Inf); a numpy float16 array."""
    return _amla._cast_to("fp16", _float32("amla.formats.to_fp16", "x", x), False,
                          "nearest").view(np.float16)


def from_fp16(h) -> np.ndarray:
    """FP16 values (float16, or uint16 bits) widened to float32 exactly."""
    h = _np(h)
    if h.dtype == np.float16:
        h = h.view(np.uint16)
    return _amla._cast_from("fp16", np.ascontiguousarray(h))


def to_fp8(x, fmt: str = "e4m3", *, saturate: bool = False) -> np.ndarray:
    """x rounded to nearest-even FP8 codes (uint8) of format "e4m3" (fn) or "e5m2"."""
    fn = "amla.formats.to_fp8"
    if fmt not in ("e4m3", "e5m2"):
        raise ValueError(invalid(fn, "fmt", repr(fmt), "must be 'e4m3' or 'e5m2'"))
    return _amla._cast_to(fmt, _float32(fn, "x", x), bool(saturate), "nearest")


def from_fp8(codes, fmt: str = "e4m3") -> np.ndarray:
    """FP8 codes widened to float32 exactly."""
    fn = "amla.formats.from_fp8"
    if fmt not in ("e4m3", "e5m2"):
        raise ValueError(invalid(fn, "fmt", repr(fmt), "must be 'e4m3' or 'e5m2'"))
    return _amla._cast_from(fmt, _codes(fn, "codes", codes, fmt))


def to_e8m0(x, rounding: str = "nearest", *, saturate: bool = False) -> np.ndarray:
    """x as e8m0 codes (uint8): a power of two 2^(c - 127); rounding "nearest" | "up" | "down"."""
    return _amla._cast_to("e8m0", _float32("amla.formats.to_e8m0", "x", x), bool(saturate),
                          rounding)


def from_e8m0(codes) -> np.ndarray:
    """e8m0 codes widened to float32 (2^(c - 127); 255 is NaN)."""
    return _amla._cast_from("e8m0", _codes("amla.formats.from_e8m0", "codes", codes, "e8m0"))


# ---- FP8 KV caches ------------------------------------------------------------------------------

def quantize_flashmla(kv, layout: str = "v32", *, page_stride_bytes: int = 0) -> np.ndarray:
    """FlashMLA's FP8 quantizer (problem/fp8_cache.hpp): kv [pages, page_size, 1, d_qk] (or
    [pages, page_size, d_qk]) in BF16, d_qk 576 for "v32" and 512 for "model1". Returns uint8
    bytes [pages, page_size, 1, 656] for v32 (with the default stride) and [pages, stride] for
    model1 (page_size * 584 bytes padded to a multiple of 576)."""
    fn = "amla.formats.quantize_flashmla"
    kv = _bf16_bits(fn, "kv", kv)
    if kv.ndim == 3:
        kv = kv[:, :, None, :]
    out = _amla._quantize_flashmla(layout, kv, int(page_stride_bytes))
    if layout == "v32" and page_stride_bytes == 0:
        return out.reshape(kv.shape[0], kv.shape[1], 1, 656)
    return out


def dequantize_flashmla(cache, layout: str = "v32", *, page_size: Optional[int] = None,
                        page_stride_bytes: int = 0, dtype: str = "bfloat16") -> np.ndarray:
    """The dense FlashMLA cache [pages, page_size, 1, d_qk] a FlashMLA FP8 cache holds, as
    FlashMLA dequantizes it (BF16; dtype="float32" gives the same values as float32). The cache
    is uint8 (or float8_e4m3fn) with pages along its first axis; page_size is read from a 4-D
    v32 cache [pages, page_size, 1, 656] and must be given otherwise."""
    fn = "amla.formats.dequantize_flashmla"
    c = _np(cache)
    if c.dtype == np.dtype(ml_dtypes.float8_e4m3fn):
        c = c.view(np.uint8)
    if c.dtype != np.uint8:
        raise ValueError(invalid(fn, "cache", f"dtype {c.dtype}", "must be uint8 bytes"))
    if c.ndim < 1:
        raise ValueError(invalid(fn, "cache", "rank 0", "must be [pages, ...]"))
    if page_size is None:
        if layout == "v32" and c.ndim == 4 and c.shape[2:] == (1, 656):
            page_size = c.shape[1]
        else:
            raise ValueError(invalid(fn, "page_size", "None",
                                     "is required unless the cache is v32 [pages, page_size, 1, 656]"))
    out = _amla._dequantize_flashmla(layout, np.ascontiguousarray(c), int(c.shape[0]),
                                     int(page_size), int(page_stride_bytes), dtype)
    return out.view(BF16) if dtype == "bfloat16" else out


def quantize_scaled(kv, fp8: str = "e4m3", *, group_size: int = 0,
                    scale: Optional[float] = None):
    """vLLM's / FlashInfer's scaled FP8 cache of kv [pages, page_size, h_kv, d] (float32 or
    bfloat16): codes = fp8(x / scale), saturating. group_size 0: one scale, ``scale`` or
    tensor_scale(kv); otherwise one scale per group_size channels of each token and head (amax /
    FP8 max). Returns (codes uint8 [pages, page_size, h_kv, d], scales float32 [1] or
    [pages, page_size, h_kv, d / group_size])."""
    kv = _float_or_bf16("amla.formats.quantize_scaled", "kv", kv)
    return _amla._quantize_scaled(fp8, kv, int(group_size),
                                  None if scale is None else float(scale))


def dequantize_scaled(codes, scales, fp8: str = "e4m3", *, group_size: int = 0,
                      dtype: str = "float32") -> np.ndarray:
    """The dense cache [pages, page_size, h_kv, d] a scaled FP8 cache holds: fp8 value * scale in
    float32, rounded once to bfloat16 with dtype="bfloat16" (vLLM's dequantization)."""
    fn = "amla.formats.dequantize_scaled"
    out = _amla._dequantize_scaled(fp8, _codes(fn, "codes", codes, fp8),
                                   np.ascontiguousarray(_np(scales)), int(group_size), dtype)
    return out.view(BF16) if dtype == "bfloat16" else out


def tensor_scale(x, fp8: str = "e4m3") -> float:
    """A whole-tensor FP8 scale for x: amax / FP8 max over the non-NaN values (1 when all zero)."""
    return _amla._tensor_scale(_float_or_bf16("amla.formats.tensor_scale", "x", x), fp8)


def quantization_error(reference, dequantized) -> dict:
    """The float64 error of a dequantized tensor against the values it was quantized from:
    compared, skipped (reference not finite), nonfinite (reference finite, dequantized not),
    max_abs_error, worst_index (flat), rms_error, reference_rms, relative_rms, max_rel_error."""
    fn = "amla.formats.quantization_error"
    return _amla._quantization_error(_float_or_bf16(fn, "reference", reference),
                                     _float_or_bf16(fn, "dequantized", dequantized))


# ---- layouts --------------------------------------------------------------------------------------

def _raw(x: np.ndarray) -> np.ndarray:
    """x viewed as unsigned integers of its element width (layout copies never look at values)."""
    return np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}")


def to_nz(kv, c0: Optional[int] = None) -> np.ndarray:
    """Ascend's NZ layout [pages, h_kv, d / c0, page_size, c0] of the ND cache kv
    [pages, page_size, h_kv, d]; c0 defaults to 32 bytes' worth of elements (16 for BF16 / FP16,
    32 for INT8 / FP8, 8 for float32). Any dtype; an exact copy."""
    kv = _np(kv)
    return _amla._to_nz(_raw(kv), int(c0 or 0)).view(kv.dtype)


def from_nz(nz) -> np.ndarray:
    """The ND cache [pages, page_size, h_kv, d] of an NZ cache [pages, h_kv, d / c0, page_size,
    c0]."""
    nz = _np(nz)
    return _amla._from_nz(_raw(nz)).view(nz.dtype)


def concat_channels(a, b) -> np.ndarray:
    """concat(a, b) along the last axis (FlashInfer's ckv + kpe, q_nope + q_pe): an exact copy."""
    a, b = _np(a), _np(b)
    if a.dtype != b.dtype:
        raise ValueError(invalid("amla.formats.concat_channels", "b", f"dtype {b.dtype}",
                                 f"must be a's dtype {a.dtype}"))
    return _amla._concat_channels(_raw(a), _raw(b)).view(a.dtype)


def split_channels(x, da: int):
    """(x[..., :da], x[..., da:]) as new arrays: the inverse of concat_channels."""
    x = _np(x)
    a, b = _amla._split_channels(_raw(x), int(da))
    return a.view(x.dtype), b.view(x.dtype)
