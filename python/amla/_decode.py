"""The decode recurrences on the FlashMLA layout (problem/shape.hpp):

    q            [batch, s_q, h_q, d_qk]                 float32 or bfloat16
    kv           [num_pages, page_size, h_kv, d_qk]      the paged K cache (V = its first d_v columns)
    v            [num_pages, page_size, h_kv, d_v]       optional separate V cache
    block_table  [batch, max_pages_per_seq]  int32       page of the i-th page_size keys of a sequence
    seqlens      [batch]                     int32       keys of each sequence
    out          [batch, s_q, h_q, d_v]
    lse          [batch, h_q, s_q]

Inputs are numpy arrays (float32, ml_dtypes.bfloat16, or uint16 holding BF16 bit patterns) or
anything with ``__dlpack__`` on the CPU (a torch tensor, float32 or bfloat16): they are read in
place, never copied unless strided. Outputs are written into ``out=`` / ``lse=`` when given (numpy
or DLPack arrays), else into new numpy arrays. Bad input raises ValueError with amla's message,
naming the argument. The GIL is released while the recurrence runs; results do not depend on
``threads``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

import ml_dtypes
import numpy as np

from . import _amla
from ._errors import invalid

BF16 = np.dtype(ml_dtypes.bfloat16)

#: The record of one located AMLA violation (attention/amla.hpp's AmlaViolation).
VIOLATION_DTYPE = np.dtype(
    [
        ("batch", np.int32),
        ("kv_head", np.int32),
        ("block", np.int64),
        ("row", np.int64),
        ("col", np.int64),
        ("add", np.int32),
        ("before", np.float32),
        ("after", np.float32),
        ("intended", np.float32),
    ]
)


#: The record of one located clamp event (attention/amla.hpp's AmlaClampEvent).
CLAMP_DTYPE = np.dtype(
    [
        ("batch", np.int32),
        ("kv_head", np.int32),
        ("block", np.int64),
        ("row", np.int64),
        ("step", np.float32),
    ]
)


class DecodeResult(NamedTuple):
    """out [batch, s_q, h_q, d_v] and lse [batch, h_q, s_q] (None when lse=False)."""

    out: Any
    lse: Any


@dataclass
class AmlaReport:
    """What AMLA's integer-add rescales did. ``violations`` counts the elements where Lemma 3.1's
    preconditions failed and ``located`` lists them (a VIOLATION_DTYPE record array: batch,
    kv_head, block, row, col, add, before, after, intended), in every rescale mode, ordered by
    (batch, kv_head, block, row, col). ``clamped`` counts the row steps whose exponent step fell
    below the clamp (every mode) and ``clamps`` lists them (a CLAMP_DTYPE record array: batch,
    kv_head, block, row, step) in the checked and safe modes. A row is a head-group row
    r = t * (h_q / h_kv) + j: token t, query head kv_head * h_q / h_kv + j."""

    violations: int
    rescaled_elements: int
    located: np.ndarray
    clamped: int = 0
    clamps: np.ndarray = None

    def as_dicts(self) -> list:
        """``located`` as a list of plain dicts."""
        names = self.located.dtype.names
        return [{n: rec[n].item() for n in names} for rec in self.located]


class AmlaResult(NamedTuple):
    """out, lse and the AmlaReport of amla.amla."""

    out: Any
    lse: Any
    report: AmlaReport


def _shape(x) -> tuple:
    return tuple(int(d) for d in x.shape)


def _input(fn: str, arg: str, x):
    """x as the extension reads it: numpy float32 / uint16 as is, ml_dtypes.bfloat16 as its uint16
    view (no copy), DLPack objects as they are (their dtype is checked in C++)."""
    if isinstance(x, np.ndarray):
        if x.dtype == BF16:
            return x.view(np.uint16)
        if x.dtype in (np.float32, np.uint16):
            return x
        raise ValueError(
            invalid(fn, arg, f"dtype {x.dtype}",
                    "must be float32, bfloat16 (ml_dtypes) or uint16 BF16 bits")
        )
    if hasattr(x, "__dlpack__"):
        return x
    return _input(fn, arg, np.asarray(x))


def _table(fn: str, arg: str, x) -> np.ndarray:
    """An int32 C-contiguous numpy array of x (a copy only when x is not one already)."""
    a = np.asarray(x)
    if a.dtype == np.int32:
        return np.ascontiguousarray(a)
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(invalid(fn, arg, f"dtype {a.dtype}", "must hold integers (int32)"))
    if a.size and (int(a.min()) < -(2**31) or int(a.max()) >= 2**31):
        raise ValueError(invalid(fn, arg, f"values in [{a.min()}, {a.max()}]", "must fit int32"))
    return a.astype(np.int32)


def _expect_shape(fn: str, arg: str, x, shape: tuple, layout: str) -> None:
    got = _shape(x)
    if got != shape:
        raise ValueError(invalid(fn, arg, f"shape {got}", f"must be {layout} = {shape}"))


class _Output:
    """A caller's output array as the extension writes it: passed directly when its dtype and
    layout allow, else through a temporary copied back after the call."""

    def __init__(self, fn: str, arg: str, user, shape: tuple, layout: str, native: np.dtype,
                 bf16_ok: bool, new_dtype) -> None:
        self.user = user
        self.temp = None
        if user is None:
            dtype = np.dtype(new_dtype) if new_dtype is not None else native
            if not (np.issubdtype(dtype, np.floating) or dtype == BF16):
                raise ValueError(invalid(fn, "out_dtype", str(dtype),
                                         "must be a floating type or ml_dtypes.bfloat16"))
            self.user = np.empty(shape, dtype=dtype)
        _expect_shape(fn, arg, self.user, shape, layout)
        u = self.user
        if isinstance(u, np.ndarray):
            if not u.flags.writeable:
                raise ValueError(invalid(fn, arg, "a read-only array", "must be writable"))
            direct = u.flags.c_contiguous and (u.dtype == native or (bf16_ok and u.dtype in (BF16, np.uint16)))
            if direct:
                self.arg = u.view(np.uint16) if u.dtype == BF16 else u
            else:
                if not np.issubdtype(u.dtype, np.floating) and u.dtype != BF16:
                    raise ValueError(invalid(fn, arg, f"dtype {u.dtype}", "must be a floating type"))
                self.temp = np.empty(shape, dtype=native)
                self.arg = self.temp
        elif hasattr(u, "__dlpack__"):
            self.arg = u
        else:
            raise ValueError(invalid(fn, arg, type(u).__name__, "must be a numpy array or support __dlpack__"))

    def finish(self):
        if self.temp is not None:
            self.user[...] = self.temp.astype(self.user.dtype)
        return self.user


def run(recurrence: str, q, kv, block_table, seqlens, *, v=None, d_v: Optional[int] = None,
        causal: bool = False, softmax_scale: Optional[float] = None, out=None, lse=None,
        out_dtype=None, return_lse: bool = True, round_output_bf16: bool = False,
        threads: int = 0, rows_per_task: int = 64, lse_base: str = "e", empty_lse: str = "-inf",
        options: Optional[dict] = None):
    """Runs recurrence ``recurrence`` ("golden", "base", "amla", "seesaw", "transposed",
    "split_kv"); the public functions in amla/__init__.py document the keywords."""
    fn = f"amla.{recurrence}"
    q = _input(fn, "q", q)
    kv = _input(fn, "kv", kv)
    if v is not None:
        v = _input(fn, "v", v)
    block_table = _table(fn, "block_table", block_table)
    seqlens = _table(fn, "seqlens", seqlens)

    if len(_shape(q)) != 4:
        raise ValueError(invalid(fn, "q", f"shape {_shape(q)}", "must be [batch, s_q, h_q, d_qk]"))
    batch, s_q, h_q, d_qk = _shape(q)
    if len(_shape(kv)) != 4:
        raise ValueError(invalid(fn, "kv", f"shape {_shape(kv)}",
                                 "must be [num_pages, page_size, h_kv, d_qk]"))
    num_pages, page_size, h_kv, kv_d = _shape(kv)
    if kv_d != d_qk:
        raise ValueError(invalid(fn, "kv", f"shape {_shape(kv)}",
                                 f"its last dimension must be q's d_qk = {d_qk}"))
    if v is not None:
        vs = _shape(v)
        if len(vs) != 4 or vs[:3] != (num_pages, page_size, h_kv):
            raise ValueError(invalid(fn, "v", f"shape {vs}",
                                     f"must be [num_pages, page_size, h_kv, d_v] with "
                                     f"[num_pages, page_size, h_kv] = {(num_pages, page_size, h_kv)}"))
        if d_v is not None and d_v != vs[3]:
            raise ValueError(invalid(fn, "d_v", str(d_v), f"must equal v.shape[3] = {vs[3]}"))
        d_v = vs[3]
    elif d_v is None:
        if d_qk != 576:
            raise ValueError(invalid(fn, "d_v", "None",
                                     f"is required when v is None and d_qk = {d_qk} is not MLA's 576"))
        d_v = 512
    if block_table.ndim != 2 or block_table.shape[0] != batch:
        raise ValueError(invalid(fn, "block_table", f"shape {block_table.shape}",
                                 f"must be [batch = {batch}, max_pages_per_seq]"))
    _expect_shape(fn, "seqlens", seqlens, (batch,), "[batch]")

    golden = recurrence == "golden"
    native = np.dtype(np.float64 if golden else np.float32)
    o = _Output(fn, "out", out, (batch, s_q, h_q, d_v), "[batch, s_q, h_q, d_v]", native, True,
                out_dtype)
    l = None
    if return_lse or lse is not None:
        l = _Output(fn, "lse", lse, (batch, h_q, s_q), "[batch, h_q, s_q]", native, False, None)
    report = _amla._decode(
        recurrence, q, kv, v, block_table, seqlens, int(d_v), o.arg, None if l is None else l.arg,
        bool(causal), None if softmax_scale is None else float(softmax_scale),
        bool(round_output_bf16), int(threads), int(rows_per_task), str(lse_base), str(empty_lse),
        dict(options or {}),
    )
    out_arr = o.finish()
    lse_arr = None if l is None else l.finish()
    if report is None:
        return DecodeResult(out_arr, lse_arr)
    def records(cols, dtype):
        r = np.empty(len(cols["row"]), dtype=dtype)
        for name in dtype.names:
            r[name] = cols[name]
        return r

    return AmlaResult(out_arr, lse_arr,
                      AmlaReport(int(report["violations"]), int(report["rescaled_elements"]),
                                 records(report["located"], VIOLATION_DTYPE),
                                 int(report["clamped"]), records(report["clamps"], CLAMP_DTYPE)))
