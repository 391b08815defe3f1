// Tests for amla/numeric/amla_step.hpp: AMLA's per-row scalars and the integer add k of one step,
// against exact bit patterns worked out by hand (the comments show the arithmetic).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "amla/numeric/amla_step.hpp"

namespace {
std::uint32_t bits(float f) {
  return amla::as_uint32(f);
}
// S32 = e / 2 rounded to FP32: 1 + 0x2DF854 / 2^23 = 1.35914087 (the CPU's S32 at m = 1).
const float s32_e_half = amla::as_fp32(0x3FADF854u);
}  // namespace

TEST_CASE("S16 is S32 rounded to BF16 to nearest even, c follows the reading", "[amla_step]") {
  amla::amla_step_options o;
  // Low half 0xF854 > 0x8000: rounds up to 0x3FAE, S16 = 1.359375.
  const auto a = amla::amla_scalars_of(-1.0f, s32_e_half, o);
  CHECK(a.n == -1.0f);
  CHECK(bits(a.s32) == 0x3FADF854u);
  CHECK(bits(a.s16) == 0x3FAE0000u);
  // c = S16 / S32 = 1 + 1445 * 2^-23, correctly rounded.
  CHECK(bits(a.c) == 0x3F8005A5u);
  o.compensation = amla::amla_compensation::as_printed;
  // c = S32 / S16 = 1 - 2890 * 2^-24.
  CHECK(bits(amla::amla_scalars_of(-1.0f, s32_e_half, o).c) == 0x3F7FF4B6u);
  o.compensation = amla::amla_compensation::none;
  CHECK(bits(amla::amla_scalars_of(-1.0f, s32_e_half, o).c) == 0x3F800000u);
  // Ties go to the even BF16: 0x3F808000 -> 0x3F80, 0x3F818000 -> 0x3F82.
  CHECK(bits(amla::amla_scalars_of(0.0f, amla::as_fp32(0x3F808000u), o).s16) == 0x3F800000u);
  CHECK(bits(amla::amla_scalars_of(0.0f, amla::as_fp32(0x3F818000u), o).s16) == 0x3F820000u);
  // float32 mode: S16 = S32, so c = 1 in the appendix_a reading and eps is 0.
  amla::amla_step_options f32;
  f32.round_s16 = false;
  const auto b = amla::amla_scalars_of(-1.0f, s32_e_half, f32);
  CHECK(bits(b.s16) == 0x3FADF854u);
  CHECK(bits(b.c) == 0x3F800000u);
}

TEST_CASE("the natural-log front end: n = round(-m / ln2), S32 = exp(ln2 (n + m / ln2))",
          "[amla_step]") {
  const amla::amla_step_options o;
  // m = 0: n = -0, S32 = exp(0) = 1 exactly, S16 = c = 1.
  const auto z = amla::amla_scalars_ln(0.0f, o);
  CHECK(z.n == 0.0f);
  CHECK(bits(z.s32) == 0x3F800000u);
  CHECK(bits(z.s16) == 0x3F800000u);
  CHECK(bits(z.c) == 0x3F800000u);
  // m = 1: -1 / ln2 = -1.4427 rounds to n = -1; S32 = e / 2 within an ulp (the libm's exp).
  const auto a = amla::amla_scalars_ln(1.0f, o);
  CHECK(a.n == -1.0f);
  CHECK(std::fabs(static_cast<double>(a.s32) - std::exp(1.0) / 2) <= 0x1p-23);
  CHECK(bits(a.s16) == 0x3FAE0000u);
  // m = -3: 3 / ln2 = 4.328 rounds to n = 4; S32 = exp(4 ln2 - 3) = 0.79659 within a few ulps
  // (the FP32 argument carries the roundings of m / ln2 and of the product), S16 = 0.796875.
  const auto b = amla::amla_scalars_ln(-3.0f, o);
  CHECK(b.n == 4.0f);
  CHECK(std::fabs(static_cast<double>(b.s32) - std::exp(4 * std::log(2.0) - 3)) <= 0x1p-21);
  CHECK(bits(b.s16) == 0x3F4C0000u);
  // S32 stays in [2^-1/2, 2^1/2] (round to nearest of n): m = 1.5 ln2 is the tie -1.5 -> -2.
  const auto h = amla::amla_scalars_ln(1.5f * 0.693147180559945309f, o);
  CHECK(h.n == -2.0f);
  CHECK(h.s32 == Approx(std::sqrt(0.5)).epsilon(1e-6));
}

TEST_CASE("the step's eps, N and k, bit for bit", "[amla_step]") {
  const amla::amla_step_options o;
  SECTION("no change of the max: only the nudge, k = trunc(1e-6 * 2^23) = 8") {
    const auto s = amla::amla_step_between(amla::amla_scalars{}, amla::amla_scalars{}, o);
    CHECK(bits(s.eps) == 0u);
    CHECK(bits(s.dn) == 0u);
    CHECK(bits(s.big_n) == bits(1e-6f));
    CHECK(s.k == 8);
    amla::amla_step_options no_nudge;
    no_nudge.nudge = 0.0f;
    CHECK(amla::amla_step_between(amla::amla_scalars{}, amla::amla_scalars{}, no_nudge).k == 0);
  }
  SECTION("skip_unmoved: equal scalars are the identity step, k = 0") {
    amla::amla_step_options skip;
    skip.skip_unmoved = true;
    // Scalars of m = 1 (n = -1, c = 1 + 1445 * 2^-23) on both sides: dn = 0, eps = 0, N = 0.
    const auto at = amla::amla_scalars_of(-1.0f, s32_e_half, skip);
    const auto s = amla::amla_step_between(at, at, skip);
    CHECK(bits(s.eps) == 0u);
    CHECK(bits(s.dn) == 0u);
    CHECK(bits(s.big_n) == 0u);
    CHECK(s.k == 0);
    CHECK(amla::amla_exact_add(at, at, skip) == 0);
    CHECK(amla::amla_step_between(at, at, o).k == 8);  // the printed step: the nudge alone
    CHECK(amla::amla_exact_add(at, at, o) == 8);
    // Any other step is the printed one, bit for bit: m = 0 -> m = 1 (below) and an equal n with
    // a different c.
    const auto first = amla::amla_step_between(amla::amla_scalars{}, at, skip);
    CHECK(bits(first.big_n) == 0xBF7FEF00u);
    CHECK(first.k == -8386432);
    amla::amla_scalars same_n = at;
    same_n.c = 1.0f;
    const auto moved = amla::amla_step_between(same_n, at, skip);
    CHECK(moved.dn == 0.0f);
    CHECK(moved.eps != 0.0f);
    CHECK(moved.k == amla::amla_step_between(same_n, at, o).k);
    // eps = 1.5 * 1445 * 2^-23: k = trunc(2167.5 + 8.39) = 2175.
    CHECK(moved.k == 2175);
  }
  SECTION("from m = 0 to m = 1") {
    // c' = 1, c = 1 + 1445 * 2^-23: eps = 1.5 * 1445 * 2^-23 = 4335 * 2^-24 (exact).
    // N = -1 + 4335 * 2^-24 + 1e-6f = -(16772881 - 16.78) * 2^-24, rounded to -16772864 * 2^-24;
    // k = N * 2^23 = -8386432 exactly: the exponent step -2^23 plus the mantissa part 2176.
    const auto next = amla::amla_scalars_of(-1.0f, s32_e_half, o);
    const auto s = amla::amla_step_between(amla::amla_scalars{}, next, o);
    CHECK(bits(s.eps) == 0x39877800u);
    CHECK(s.dn == -1.0f);
    CHECK(bits(s.big_n) == 0xBF7FEF00u);
    CHECK(s.k == -8386432);
    CHECK(s.k == -(1 << 23) + 2176);
  }
  SECTION("the as_printed reading adds the opposite mantissa part") {
    amla::amla_step_options p;
    p.compensation = amla::amla_compensation::as_printed;
    const auto next = amla::amla_scalars_of(-1.0f, s32_e_half, p);
    const auto s = amla::amla_step_between(amla::amla_scalars{}, next, p);
    CHECK(bits(s.eps) == 0xB9877800u);  // -4335 * 2^-24
    CHECK(bits(s.big_n) == 0xBF800870u);
    CHECK(s.k == -8390768);
  }
  SECTION("the cast of N * 2^23: truncation versus nearest even") {
    // dn = -1, eps = 0: N = -1 + 1e-6f rounds to -(2^24 - 17) * 2^-24, N * 2^23 = -8388599.5.
    amla::amla_scalars prev, next;
    next.n = -1.0f;
    const auto t = amla::amla_step_between(prev, next, o);
    CHECK(bits(t.big_n) == 0xBF7FFFEFu);
    CHECK(t.k == -(1 << 23) + 9);  // truncated toward zero
    amla::amla_step_options ne;
    ne.n_cast = amla::eps_rounding::nearest_even;
    CHECK(amla::amla_step_between(prev, next, ne).k == -(1 << 23) + 8);  // the tie goes to even
  }
  SECTION("the exponent clamp and the nudge's 16 for 16 <= |dn| < 32") {
    amla::amla_scalars prev, next;
    next.n = -40.0f;
    const auto s = amla::amla_step_between(prev, next, o);
    CHECK(s.dn == -30.0f);
    // -30 + 1e-6: the ulp at 30 is 2^-19 = 1.9e-6, so N = -30 + 2^-19 and k = -30 * 2^23 + 16.
    CHECK(s.big_n == -30.0f + 0x1p-19f);
    CHECK(s.k == -30 * (1 << 23) + 16);
    CHECK(s.clamped);
    amla::amla_step_options wide;
    wide.exponent_clamp = -126.0f;
    CHECK(amla::amla_step_between(prev, next, wide).dn == -40.0f);
    CHECK_FALSE(amla::amla_step_between(prev, next, wide).clamped);
    next.n = -30.0f;  // exactly at the clamp: not clamped
    CHECK_FALSE(amla::amla_step_between(prev, next, o).clamped);
  }
  SECTION("the exact add: the unclamped step in 64 bits") {
    amla::amla_scalars prev, next;
    // Unclamped steps: the same k as the clamped step.
    for (const float n : {0.0f, -1.0f, -17.0f, -30.0f}) {
      next.n = n;
      CHECK(amla::amla_exact_add(prev, next, o) == amla::amla_step_between(prev, next, o).k);
    }
    // -40 + 1e-6: the ulp at 40 is 2^-18 = 3.8e-6, so N = -40 exactly and k = -40 * 2^23 (the
    // clamped step keeps -30 + 2^-19).
    next.n = -40.0f;
    CHECK(amla::amla_exact_add(prev, next, o) == -40 * (std::int64_t{1} << 23));
    // -300: past the int32 range (-300 * 2^23 < -2^31).
    next.n = -300.0f;
    CHECK(amla::amla_exact_add(prev, next, o) == -300 * (std::int64_t{1} << 23));
    // With the compensation: n' = -1 at S32 = e / 2 (c' = 1 + 1445 * 2^-23), n = -301 at c = 1:
    // c / c' = 1 - 2890 * 2^-24 (0x3F7FF4B6), eps = -4335 * 2^-24 exactly; the ulp of 300 is
    // 2^-15 = 512 * 2^-24, so -300 + eps rounds to -300 - 8 * 2^-15 (8.47 ulps), the nudge (0.03
    // ulp) changes nothing, and k = -300 * 2^23 - 8 * 2^8.
    prev = amla::amla_scalars_of(-1.0f, s32_e_half, o);
    next = amla::amla_scalars{};
    next.n = -301.0f;
    CHECK(amla::amla_exact_add(prev, next, o) == -300 * (std::int64_t{1} << 23) - 2048);
    // A step so large that N * 2^23 leaves the int64 range saturates at -2^62.
    prev = amla::amla_scalars{};
    next.n = -1e30f;
    CHECK(amla::amla_exact_add(prev, next, o) == -(std::int64_t{1} << 62));
  }
}

TEST_CASE("the step is usable where its inputs are known at compile time", "[amla_step]") {
  constexpr auto a = amla::amla_scalars_of(-1.0f, amla::as_fp32(0x3FADF854u), {});
  STATIC_REQUIRE(amla::as_uint32(a.s16) == 0x3FAE0000u);
  STATIC_REQUIRE(amla::as_uint32(a.c) == 0x3F8005A5u);
}
