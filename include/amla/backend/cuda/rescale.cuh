// amla/backend/cuda/rescale.cuh: the per-row bookkeeping of the two rescaling modes, shared by
// every CUDA kernel of amla. online_softmax.cuh and amla.cuh name the modes for users; the
// arithmetic of AMLA's step is numeric/amla_step.hpp's and its add numeric/pow2.hpp's, the same
// functions attention/amla.hpp calls. This file holds only what is the GPU's own: base-2 units,
// the frame a kernel keeps per row, and the fused forms of the add its registers can afford.
//
// Units. Kernels work in base 2: a score is s2 = (q . k) * softmax_scale * log2(e), the running
// max m is the max of s2, and P = exp2(s2 - m). The natural-log quantities of the CPU headers are
// these times ln 2: m_nat = m * ln2, lse = (m + log2(l)) * ln2. AMLA's n = round(-m_nat / ln2)
// is therefore round(-m), and S32 = exp(ln2 (n + m_nat / ln2)) = exp2(n + m): amla_scalars_log2
// is the base-2 front end of numeric/amla_step.hpp's amla_scalars_ln, and everything after (n, S32)
// -> (S16, c, eps, N, k) is the shared code.
#pragma once

#include "amla/backend/cuda/detail/check.cuh"

#include <cuda_bf16.h>

#include <cstdint>

#include "amla/numeric/amla_step.hpp"
#include "amla/numeric/pow2.hpp"

namespace amla::cuda {

/// How the kernels rescale the output accumulator when the running max grows.
enum class rescale_mode : std::uint8_t {
  /// Base (attention/online_softmax.hpp): O *= exp(m_old - m_new) in FP32, P = exp(s - m) cast to
  /// BF16, out = O / l.
  standard,
  /// AMLA (attention/amla.hpp, Algorithm 2 with Appendix A): O's FP32 bit pattern gets one integer
  /// add k per block, P is scaled by S16 before its BF16 cast, out = O / (l * S16).
  amla,
};

/// One query row's state after some KV blocks (base-2 units, see the file comment).
/// AMLA's per-row scalars n, S32, S16 and c are functions of m alone (see amla_scalars), so a
/// frame stores only m: the kernels keep 128 accumulators per thread in registers and cannot
/// afford three more per row.
struct row_frame {
  float m = -__builtin_huge_valf();  ///< running max of s2; -inf before the first visible key
};

/// What moving a row from one frame to the next asks of a kernel.
struct frame_step {
  row_frame next;
  float o_scale = 1.0f;    ///< standard: multiply O by this
  std::int32_t o_add = 0;  ///< AMLA: add this to O's FP32 bit pattern (0: no add)
  float p_scale = 1.0f;    ///< multiply exp2(s2 - m) by this before the BF16 cast (AMLA: S16)
  float l_scale = 1.0f;    ///< multiply l by this: exp2(m_old - m_new)
};

namespace detail {

inline constexpr float neg_inf_f = -__builtin_huge_valf();

/// exp2 on the special function unit, one instruction (relative error about 2^-22,
/// exp2(-inf) = 0). Results below 2^-126 are flushed to 0 (.ftz: the form without it costs three
/// more instructions to scale subnormal results): a probability or a rescale factor that small
/// weighs less than 2^-126 against the row's largest term, which is at least 1.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// max(a, b) that propagates NaN (PTX max.NaN, sm_80): a NaN score makes the running max, and
/// with it the row's every later quantity, NaN (problem/conventions.hpp), where fmaxf would drop
/// it and a row of NaN scores would look empty.
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

/// min(m, |x|) that propagates NaN (PTX min.NaN, sm_80; the magnitude is an operand modifier, no
/// instruction of its own): a NaN x makes the result NaN, where fminf would drop it.
__device__ __forceinline__ float min_abs_nan(float m, float x) {
  float r;
  asm("{\n.reg .f32 a;\nabs.f32 a, %2;\nmin.NaN.f32 %0, %1, a;\n}" : "=f"(r) : "f"(m), "f"(x));
  return r;
}

/// The max to subtract: m, or 0 for a row whose scores so far are all -inf (none seen, or every
/// one overflowed to -inf), so that exp2(-inf - 0) = 0 and no NaN appears.
__device__ __forceinline__ float usable_max(float m) {
  return m == neg_inf_f ? 0.0f : m;
}

/// The options of AMLA's step the kernels run: the paper's kernel (numeric/amla_step.hpp's
/// defaults, attention::AmlaOptions' defaults in bf16 mode): appendix_a compensation, S16 rounded
/// to BF16, clamp -30, nudge 1e-6, truncating cast of N * 2^23; skip_unmoved as
/// CudaDecodeOptions::skip_unmoved asks (it changes k alone, never the scalars).
__host__ __device__ constexpr amla_step_options amla_kernel_step(bool skip_unmoved) {
  amla_step_options o{};
  o.skip_unmoved = skip_unmoved;
  return o;
}

/// amla_scalars_log2 of a max that has seen a key (m != -inf; for -inf the scalars are NaN). The
/// exponent n + m lies in [-0.5, 0.5] (or is NaN), where ex2.approx.ftz is exp2f bit for bit
/// (exp2f adds a scaling of arguments below -126 around the same instruction; cuda_decode's gpu
/// test compares the two on every such argument).
__device__ __forceinline__ amla_scalars amla_scalars_log2_seen(float m) {
  const float n = rintf(-m);
  return amla_scalars_of(n, fast_exp2(__fadd_rn(n, m)), amla_kernel_step(false));
}

}  // namespace detail

/// AMLA's scalars of a base-2 running max m: n = rint(-m) (nearest even), S32 = exp2(n + m) (the
/// device's exp2f, as ex2.approx; its last bit may differ from the CPU's std::exp), then
/// numeric/amla_step.hpp's amla_scalars_of for S16 and c. A row that has seen no key (m = -inf) has
/// the default scalars n = 0, S16 = S32 = c = 1.
__device__ __forceinline__ amla_scalars amla_scalars_log2(float m) {
  if (m == detail::neg_inf_f) return amla_scalars{};
  return detail::amla_scalars_log2_seen(m);
}

namespace detail {

/// AMLA's k for a step between equal scalars (the max did not move): eps = 1.5 (c / c - 1) = 0
/// and dn = 0 whatever the scalars, so N is the nudge alone and k (8 with the defaults, 0 with
/// skip_unmoved) depends on the options only: numeric/amla_step.hpp's amla_step_between on any
/// pair of equal scalars.
__device__ __forceinline__ std::int32_t amla_unmoved_k(const amla_step_options& step) {
  return amla_step_between(amla_scalars{}, amla_scalars{}, step).k;
}

}  // namespace detail

/// The step from frame `old` to running max `m_new` (>= old.m) in the given mode. Mirrors, per
/// row, attention/online_softmax.hpp (standard) and attention/amla.hpp (AMLA: amla_scalars_log2
/// for both frames, then numeric/amla_step.hpp's amla_step_between for k; a row that has seen no
/// key yet gets no add). AMLA's scalars travel with the frames instead of being recomputed:
/// `old_scalars` are amla_scalars_log2(old.m) (the defaults for a frame that has seen no key), as
/// the step that made `old` returned them in `scalars`, which receives those of the new frame. When
/// the max does not move they are the old ones and k is `unmoved_k`, amla_unmoved_k(step), the
/// same values bit for bit, which a kernel computes once, outside its block loop. `step` is
/// amla_kernel_step(skip_unmoved). The standard mode ignores the AMLA arguments. Both modes run
/// without a branch: the Hopper kernel's block loop loses more to a branch here (which confines the
/// scheduling of the code around it) than to the moved step's arithmetic done on every block and
/// discarded where the max did not move (bench/CUDA_RESULTS.md).
template <rescale_mode Mode>
__device__ __forceinline__ frame_step step_frame(const row_frame& old,
                                                 const amla_scalars& old_scalars, float m_new,
                                                 amla_scalars& scalars,
                                                 const amla_step_options& step,
                                                 std::int32_t unmoved_k) {
  frame_step st;
  scalars = old_scalars;
  const bool started = old.m != detail::neg_inf_f;
  if constexpr (Mode == rescale_mode::standard) {
    // The same values by selects, without a branch (on the softmax's path in the Hopper kernel):
    // a row with still no visible key (m_new = -inf, so old.m = -inf) keeps its frame with
    // factors 1; exp2(-inf - -inf) = NaN is computed there and never selected.
    const bool seen = m_new != detail::neg_inf_f;
    const float f = started ? detail::fast_exp2(old.m - m_new) : 0.0f;
    st.l_scale = seen ? f : 1.0f;
    st.o_scale = st.l_scale;
    st.next.m = seen ? m_new : old.m;
    return st;
  } else {
    // A row with still no visible key (m_new = -inf) keeps its frame, scalars and factors 1 and
    // gets no add (O and l are 0), as does one that has seen none before this step; a moved max
    // (NaN included) takes the new scalars and their k, an unmoved one keeps the old with
    // unmoved_k. The moved step's values are computed in every case and selected.
    const bool seen = m_new != detail::neg_inf_f;
    const bool moved = seen && m_new != old.m;
    const amla_scalars fresh = detail::amla_scalars_log2_seen(m_new);
    const std::int32_t k = amla_step_between(old_scalars, fresh, step).k;
    scalars.n = moved ? fresh.n : old_scalars.n;
    scalars.s32 = moved ? fresh.s32 : old_scalars.s32;
    scalars.s16 = moved ? fresh.s16 : old_scalars.s16;
    scalars.c = moved ? fresh.c : old_scalars.c;
    const float f = started ? detail::fast_exp2(old.m - m_new) : 0.0f;
    st.l_scale = seen ? f : 1.0f;
    // For an unseen row m_new = old.m and the old scalars are the defaults (S16 = 1), so these two
    // selects give what m_new and scalars.s16 hold; without them the Hopper kernel measured
    // 0.4-1.0% slower (bench/CUDA_RESULTS.md, row 113).
    st.next.m = seen ? m_new : old.m;
    st.p_scale = seen ? scalars.s16 : 1.0f;
    st.o_add = (seen && started) ? (moved ? k : unmoved_k) : 0;
  }
  return st;
}

/// The same step, with amla_unmoved_k computed here.
template <rescale_mode Mode>
__device__ __forceinline__ frame_step step_frame(const row_frame& old,
                                                 const amla_scalars& old_scalars, float m_new,
                                                 amla_scalars& scalars,
                                                 const amla_step_options& step) {
  return step_frame<Mode>(old, old_scalars, m_new, scalars, step, detail::amla_unmoved_k(step));
}

/// The same step for a kernel that keeps only m: the old frame's scalars are recomputed.
template <rescale_mode Mode>
__device__ __forceinline__ frame_step step_frame(const row_frame& old, float m_new,
                                                 const amla_step_options& step) {
  amla_scalars scalars;
  return step_frame<Mode>(old,
                          Mode == rescale_mode::amla ? amla_scalars_log2(old.m) : amla_scalars{},
                          m_new, scalars, step);
}

namespace detail {

/// The window of magnitudes whose add of k the Hopper kernel keeps (numeric/pow2.hpp's
/// pattern_add_window_of), except that k = 0 keeps everything: adding 0 changes no pattern, so
/// there is nothing to flush (the CPU still reports zeros and subnormals under k = 0 as outside
/// Lemma 3.1; the values agree).
__device__ __forceinline__ pattern_add_window kept_window(std::int32_t k) {
  return k == 0 ? pattern_add_window{0u, 0xFFFFFFFFu} : pattern_add_window_of(k);
}

/// The safe add of one element, in three instructions (the Hopper kernel's rescale_rows runs it on
/// a warp only when some element of the warp lies below its window or is NaN, and the raw add,
/// which is the same there, on every other warp): from the exact window's low end `lo` up the raw
/// add, which inside the window is pattern_add_intended (Lemma 3.1); below it
/// (a zero, a subnormal, or a value the add would push below the normal range) the signed zero,
/// where pattern_add_intended gives a subnormal, the smallest normal (rounded up), or under a
/// positive step for a subnormal source a normal value. On a non-finite element (the Hopper
/// kernel's O meets one only through an infinite K value, driver.cuh) an infinite one gets the raw
/// add, garbage as the hardware form makes it, and a NaN stays NaN. The top of the window
/// (overflow to Inf) cannot be reached by a finite O element: |O| stays below the key count times
/// max |V|. cuda_decode's gpu test runs it on every FP32 pattern for nine steps. `lo_f` is lo's
/// pattern as a float: the magnitudes of non-NaN floats order as their patterns, so mag >= lo is
/// |o| >= lo_f, a float compare (no NaN passes it). In place, in one asm statement, so that the
/// pattern never leaves o's register (ptx::add_to_pattern says why): p = |o| >= lo_f; where p, o =
/// AS_FP32(pattern(o) + k); elsewhere o = o * 0 (the signed zero; NaN for a NaN). The compare runs
/// on the ALU pipe, the add and the multiply on the FMA pipes: one ALU instruction an element (a
/// select on the pattern takes three).
__device__ __forceinline__ void amla_add_flush(float& o, std::uint32_t k, float lo_f) {
  asm("{\n.reg .b32 u;\n.reg .f32 a;\n.reg .pred p;\n"
      "abs.f32 a, %0;\nsetp.ge.f32 p, a, %2;\nmov.b32 u, %0;\n@p add.u32 u, u, %1;\n"
      "mov.b32 %0, u;\n@!p mul.rn.f32 %0, %0, 0f00000000;\n}"
      : "+f"(o)
      : "r"(k), "f"(lo_f));
}

}  // namespace detail

/// The final divisor of a row's accumulator: l (standard) or l * S16 (AMLA).
template <rescale_mode Mode>
__device__ __forceinline__ float output_divisor(const row_frame& f, float l) {
  if constexpr (Mode == rescale_mode::standard) {
    return l;
  } else {
    return __fmul_rn(l, amla_scalars_log2(f.m).s16);
  }
}

}  // namespace amla::cuda
