"""Comparisons a kernel test can assert on, with the criteria of the suites kernels are held to.

    out, lse = my_kernel(...)
    g = amla.golden(q, kv, block_table, seqlens)                  # float64 truth
    e = amla.base(q, kv, block_table, seqlens)                    # same-precision emulation
    amla.testing.assert_close(out, g.out, emulated=e.out)         # no atol to guess

Criteria (each returns a Criterion: passed, value, limit, detail):
  flashmla(actual, reference)    FlashMLA's: the positions of +-inf and NaN must match; every
                                 finite element within abs_tol or rel_tol * |ref|; the cosine
                                 difference 1 - 2 sum(a r) / sum(a^2 + r^2) below cos_diff_tol.
  catlass(actual, golden, emulated)  CATLASS's dual benchmark: the kernel's max relative error,
                                 mean relative error and RMSE against golden, each as a ratio to
                                 the same metric of the same-precision emulated reference (amla's
                                 Base playing CATLASS's cpu_low); every ratio at most its limit.
  atb(actual, golden, k)         ATB's per-element bound |a - g| <= max(|g|, 1) * 2^-k.
  frobenius(actual, golden)      relative Frobenius error ||a - g|| / ||g|| at most a limit.
assert_close runs the derived default (below) or any of these and raises AssertionError naming
the worst elements and rows. Arrays may be numpy (float, ml_dtypes.bfloat16) or torch tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ._decode import BF16

__all__ = ["Criterion", "flashmla", "catlass", "atb", "frobenius", "rel_frobenius",
           "cos_diff", "assert_close", "compare"]


@dataclass
class Criterion:
    """One criterion's verdict: the measured value against its limit."""

    name: str
    passed: bool
    value: float
    limit: float
    detail: str = ""

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        verdict = "pass" if self.passed else "FAIL"
        return f"{self.name}: {verdict} ({self.detail or f'{self.value:.4g} vs limit {self.limit:.4g}'})"


def _f64(x) -> np.ndarray:
    """x as a float64 numpy array (torch tensors and ml_dtypes.bfloat16 included)."""
    if not isinstance(x, np.ndarray):
        if str(getattr(x, "dtype", "")) == "torch.bfloat16":
            x = x.detach().cpu().float().numpy()
        elif hasattr(x, "detach"):
            x = x.detach().cpu().numpy()
        else:
            x = np.asarray(x)
    if x.dtype == np.uint16:
        x = x.view(BF16)
    return np.asarray(x, dtype=np.float64)


def _pair(actual, reference, what: str):
    a, r = _f64(actual), _f64(reference)
    if a.shape != r.shape:
        raise ValueError(f"amla.testing.{what}: argument 'actual' = shape {a.shape} violates: "
                         f"must have the reference's shape {r.shape}")
    return a, r


def _nonfinite_mismatch(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Where a and r disagree on NaN, +inf or -inf."""
    return (np.isnan(a) != np.isnan(r)) | (np.isposinf(a) != np.isposinf(r)) | \
        (np.isneginf(a) != np.isneginf(r))


def _where(idx: tuple, shape: tuple) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def cos_diff(actual, reference) -> float:
    """FlashMLA's cosine difference 1 - 2 sum(a r) / max(sum(a^2 + r^2), 1e-12) over the
    elements finite in both."""
    a, r = _pair(actual, reference, "cos_diff")
    fin = np.isfinite(a) & np.isfinite(r)
    a, r = a[fin], r[fin]
    return float(1.0 - 2.0 * np.sum(a * r) / max(float(np.sum(a * a + r * r)), 1e-12))


def rel_frobenius(actual, golden) -> float:
    """||a - g||_F / ||g||_F over the elements finite in both (0 when both are 0)."""
    a, g = _pair(actual, golden, "rel_frobenius")
    fin = np.isfinite(a) & np.isfinite(g)
    num = float(np.linalg.norm(a[fin] - g[fin]))
    den = float(np.linalg.norm(g[fin]))
    return 0.0 if num == 0.0 else (num / den if den > 0 else float("inf"))


def flashmla(actual, reference, *, abs_tol: float = 8e-4, rel_tol: float = 2.01 / 128,
             cos_diff_tol: float = 1e-5) -> Criterion:
    """FlashMLA's criteria (see the module comment); the verdict fails on the first broken one."""
    a, r = _pair(actual, reference, "flashmla")
    bad = _nonfinite_mismatch(a, r)
    if bad.any():
        i = np.unravel_index(int(np.argmax(bad)), a.shape)
        return Criterion("flashmla", False, float(bad.sum()), 0.0,
                         f"{int(bad.sum())} positions of inf/NaN differ, first at "
                         f"{_where(i, a.shape)}: actual {a[i]}, reference {r[i]}")
    fin = np.isfinite(r)  # a is finite exactly where r is (checked above)
    err = np.where(fin, np.abs(np.where(fin, a, 0.0) - np.where(fin, r, 0.0)), 0.0)
    ok = (err <= abs_tol) | (err <= rel_tol * np.abs(np.where(fin, r, 0.0)))
    if not ok.all():
        i = np.unravel_index(int(np.argmax(np.where(ok, -1.0, err))), a.shape)
        return Criterion("flashmla", False, float(err[i]), abs_tol,
                         f"{int((~ok).sum())} elements beyond abs {abs_tol:g} and rel {rel_tol:g}; "
                         f"worst at {_where(i, a.shape)}: actual {a[i]:.6g}, reference {r[i]:.6g}")
    cd = cos_diff(a, r)
    return Criterion("flashmla", cd <= cos_diff_tol, cd, cos_diff_tol,
                     f"elements within abs {abs_tol:g} / rel {rel_tol:g}; cos_diff {cd:.3g} "
                     f"(limit {cos_diff_tol:g})")


def _error_metrics(x: np.ndarray, g: np.ndarray, small: float):
    fin = np.isfinite(g) & np.isfinite(x)
    err = np.abs(x[fin] - g[fin])
    rel = err / np.maximum(np.abs(g[fin]), small)
    if err.size == 0:
        return 0.0, 0.0, 0.0
    return float(rel.max()), float(rel.mean()), float(np.sqrt(np.mean(err * err)))


def catlass(actual, golden, emulated, *, max_ratio: float = 10.0, mean_ratio: float = 2.0,
            rmse_ratio: float = 2.0, small_value: float = 1e-3) -> Criterion:
    """CATLASS's dual benchmark: (max rel, mean rel, RMSE) of actual against golden divided by
    those of emulated against golden; relative errors divide by max(|g|, small_value). A ratio
    whose emulated metric is 0 compares the kernel's metric against float64 rounding instead."""
    a, g = _pair(actual, golden, "catlass")
    e = _f64(emulated)
    ka = _error_metrics(a, g, small_value)
    ke = _error_metrics(e, g, small_value)
    tiny = np.finfo(np.float32).eps * 1e-3
    ratios = [x / max(y, tiny) for x, y in zip(ka, ke)]
    limits = [max_ratio, mean_ratio, rmse_ratio]
    names = ["max rel", "mean rel", "RMSE"]
    passed = all(r <= lim for r, lim in zip(ratios, limits))
    worst = max(range(3), key=lambda j: ratios[j] / limits[j])
    detail = "; ".join(f"{n} {x:.3g} / emulated {y:.3g} = {r:.3g} (limit {lim:g})"
                       for n, x, y, r, lim in zip(names, ka, ke, ratios, limits))
    return Criterion("catlass", passed, ratios[worst], limits[worst], detail)


def atb(actual, golden, *, k: int = 7) -> Criterion:
    """ATB's per-element bound |a - g| <= max(|g|, 1) * 2^-k; inf/NaN positions must match."""
    a, g = _pair(actual, golden, "atb")
    bad = _nonfinite_mismatch(a, g)
    fin = np.isfinite(g) & np.isfinite(a)
    err = np.where(fin, np.abs(np.where(fin, a, 0.0) - np.where(fin, g, 0.0)), 0.0)
    allowed = np.maximum(np.abs(np.where(fin, g, 0.0)), 1.0) * 2.0 ** -k
    over = (err > allowed) | bad
    score = np.where(bad, np.inf, err / allowed)
    ratio = float(np.max(score)) if err.size else 0.0
    if not over.any():
        return Criterion("atb", True, ratio, 1.0, f"max |a - g| / (max(|g|, 1) 2^-{k}) = {ratio:.3g}")
    i = np.unravel_index(int(np.argmax(np.where(over, score, -1.0))), a.shape)
    return Criterion("atb", False, ratio, 1.0,
                     f"{int(over.sum())} elements beyond max(|g|, 1) 2^-{k}; worst at "
                     f"{_where(i, a.shape)}: actual {a[i]:.6g}, golden {g[i]:.6g}")


def frobenius(actual, golden, *, limit: float = 2.0 ** -8) -> Criterion:
    """Relative Frobenius error against golden at most ``limit``."""
    v = rel_frobenius(actual, golden)
    return Criterion("frobenius", v <= limit, v, limit, f"||a - g|| / ||g|| = {v:.3g} (limit {limit:g})")


def compare(actual, golden, *, emulated=None, k: float = 4.0, atol: Optional[float] = None,
            rtol: Optional[float] = None, criteria: Sequence[str] = ("default",)) -> list:
    """The criteria assert_close checks, as Criterion values (see assert_close)."""
    out = []
    for c in criteria:
        if c == "default":
            out.append(_default(actual, golden, emulated, k, atol, rtol)[0])
        elif c == "flashmla":
            out.append(flashmla(actual, golden))
        elif c == "catlass":
            if emulated is None:
                raise ValueError("amla.testing.compare: argument 'emulated' = None violates: "
                                 "the catlass criterion needs the emulated reference")
            out.append(catlass(actual, golden, emulated))
        elif c == "atb":
            out.append(atb(actual, golden))
        elif c == "frobenius":
            out.append(frobenius(actual, golden))
        else:
            raise ValueError(f"amla.testing.compare: argument 'criteria' = {c!r} violates: must be "
                             "'default', 'flashmla', 'catlass', 'atb' or 'frobenius'")
    return out


def _default(actual, golden, emulated, k, atol, rtol):
    """The derived tolerance. With ``emulated``: every row (all indices but the last) may err by
    k times the emulated kernel's largest error against golden on that row, floored at 2^-20 of
    the row's magnitude (so an exactly-emulated row still allows float32 reordering), and the
    relative Frobenius error may be k times the emulated one's. Without it: |a - g| <= atol +
    rtol |g| (defaults 1e-2 and 2^-7: BF16 output precision)."""
    a, g = _pair(actual, golden, "assert_close")
    bad = _nonfinite_mismatch(a, g)
    fin = np.isfinite(g) & np.isfinite(a)
    err = np.where(fin, np.abs(np.where(fin, a, 0.0) - np.where(fin, g, 0.0)), 0.0)
    if a.ndim == 0:
        a, g, err, bad, fin = (x.reshape(1, 1) for x in (a, g, err, bad, fin))
    if emulated is not None:
        e = _f64(emulated)
        if e.shape != g.shape:
            raise ValueError(f"amla.testing.assert_close: argument 'emulated' = shape {e.shape} "
                             f"violates: must have golden's shape {g.shape}")
        e = e.reshape(g.shape)
        efin = np.isfinite(e) & np.isfinite(g)
        eerr = np.where(efin, np.abs(np.where(efin, e, 0.0) - np.where(efin, g, 0.0)), 0.0)
        gmag = np.max(np.where(np.isfinite(g), np.abs(g), 0.0), axis=-1, keepdims=True)
        row_allowed = np.maximum(k * np.max(eerr, axis=-1, keepdims=True), 2.0 ** -20 * gmag)
        allowed = np.broadcast_to(row_allowed, g.shape)
        rule = f"k = {k:g} x the emulated kernel's per-row error against golden"
        fa, fe = rel_frobenius(a, g), rel_frobenius(e, g)
        frob_ok = fa <= max(k * fe, 2.0 ** -20)
        frob = f"rel Frobenius {fa:.3g} vs emulated {fe:.3g} (limit k x = {max(k * fe, 2.0 ** -20):.3g})"
    else:
        atol_ = 1e-2 if atol is None else atol
        rtol_ = 2.0 ** -7 if rtol is None else rtol
        allowed = atol_ + rtol_ * np.abs(np.where(np.isfinite(g), g, 0.0))
        rule = f"|a - g| <= {atol_:g} + {rtol_:g} |g|"
        frob_ok, frob = True, f"rel Frobenius {rel_frobenius(a, g):.3g}"
    over = (err > allowed) | bad
    n_over = int(over.sum())
    score = np.where(bad, np.inf, err / np.maximum(allowed, 1e-300))
    worst = float(np.max(score)) if score.size else 0.0
    passed = n_over == 0 and frob_ok
    lines = [f"{n_over} of {a.size} elements out of tolerance ({rule}); {frob}"]
    flipped = (np.isposinf(a) & np.isneginf(g)) | (np.isneginf(a) & np.isposinf(g))
    if flipped.any():
        lines.append(f"{int(flipped.sum())} elements are infinities of the opposite sign: an lse "
                     "convention mismatch? (empty_lse=, amla.convert_lse)")
    if not passed:
        order = np.argsort(-score, axis=None, kind="stable")[:5]
        lines.append("worst elements:")
        for flat in order:
            i = np.unravel_index(int(flat), a.shape)
            extra = f", emulated {e[i]:.6g}" if emulated is not None else ""
            lines.append(f"  {_where(i, a.shape)}: actual {a[i]:.6g}, golden {g[i]:.6g}{extra}, "
                         f"|err| {err[i]:.3g}, allowed {allowed[i]:.3g}")
        row_score = np.max(score.reshape(-1, a.shape[-1]), axis=-1)
        row_fail = np.sum(over.reshape(-1, a.shape[-1]), axis=-1)
        lines.append(f"worst rows (index over {a.shape[:-1]}, {int((row_fail > 0).sum())} rows fail):")
        for r in np.argsort(-row_score, kind="stable")[:5]:
            if row_fail[r] == 0 and frob_ok:
                break
            ri = np.unravel_index(int(r), a.shape[:-1]) if a.ndim > 1 else ()
            lines.append(f"  {_where(ri, a.shape[:-1])}: {int(row_fail[r])} elements out, "
                         f"worst |err| / allowed {row_score[r]:.3g}")
    return Criterion("default", passed, worst, 1.0, "\n".join(lines)), lines


def assert_close(actual, golden, *, emulated=None, k: float = 4.0, atol: Optional[float] = None,
                 rtol: Optional[float] = None, criteria: Sequence[str] = ("default",)) -> None:
    """Raises AssertionError unless ``actual`` passes every criterion against ``golden``.

    The default criterion derives its tolerance: with ``emulated`` (the same-precision emulation
    of the kernel, e.g. amla.base(...).out) the kernel may err by no more than k times what the
    emulation errs against golden, row by row, and in relative Frobenius norm; without it, by
    atol + rtol |golden|. Positions of +-inf and NaN must match in every criterion. Other
    criteria: "flashmla", "catlass" (needs emulated), "atb", "frobenius" (see the module). The
    message names the worst elements and rows."""
    results = compare(actual, golden, emulated=emulated, k=k, atol=atol, rtol=rtol,
                      criteria=criteria)
    failed = [c for c in results if not c.passed]
    if failed:
        raise AssertionError("amla.testing.assert_close failed:\n" +
                             "\n".join(f"{c.name}: {c.detail}" for c in failed))
