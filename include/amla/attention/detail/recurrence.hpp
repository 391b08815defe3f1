// amla/attention/detail/recurrence.hpp: the pieces every recurrence header shares (operands as the
// matrix unit sees them, owned dense results, the one decode entry point, FlashMLA's base-2
// softmax scale, and what keeps problem/conventions.hpp's contract: a NaN-propagating max and the
// shield that keeps values a row does not see out of its output). Not for direct inclusion.
//
// A recurrence is described to the decode entry point by a descriptor R:
//   R::Options, R::Scalar (float, or double for golden), R::Report (NoReport when none)
//   R::decode_name, R::options_name     "seesaw_decode" and "seesaw": how errors name them
//   R::validate(fn, prefix, options)    throws amla::invalid_argument naming `<prefix>.<field>`
//   R::gather(options)                  the operand_gather the driver performs
//   R::core(group, options, out, lse[, report])
//                                       the dense recurrence on validated arguments whose
//                                       operands already are as the matrix unit sees them (the
//                                       driver rounded them while gathering, or the cache is bf16)
//   with a report: R::place(report, location) (a chunk's report located in the problem),
//   R::merge(total, part) and R::finish(total) (an order that does not depend on the threads).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <mutex>
#include <numbers>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "amla/attention/driver.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/config.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/fp16.hpp"
#include "amla/numeric/gemm.hpp"

namespace amla::attention::detail {

/// scale * log2(e) rounded once to float, as FlashMLA's host code computes scale_softmax_log2.
inline float scale_log2(float scale) {
  return static_cast<float>(static_cast<double>(scale) * std::numbers::log2e);
}

/// max(a, b) that returns NaN when either is NaN (std::max(a, NaN) returns a, which would let a
/// row's running max skip a NaN score; problem/conventions.hpp, rule 3).
template <class S>
constexpr S max_propagating_nan(S a, S b) noexcept {
  return (b > a || b != b) ? b : a;
}

/// Keeps the values a row does not see out of its output (problem/conventions.hpp, rule 1).
///
/// A recurrence multiplies P (0 where a row does not see a key) by the values of every key some
/// row of the group sees, so a NaN or Inf value of a key that one row sees and another does not
/// would reach the second through 0 * NaN. Only keys in [min_r visible[r], max_r visible[r]) are
/// seen by some rows and not by others (at most s_q - 1 keys of a causal decode group); the shield
/// scans their values, and when one is not finite it hands the recurrence a copy of V with those
/// entries set to 0 (group()) and afterwards adds each of them to the outputs of the rows that see
/// it (restore(out)): there, as in golden's sum, a NaN makes the element NaN and an Inf makes it
/// +-inf or NaN. With finite values (the usual case) group() is the caller's group, nothing is
/// copied and restore does nothing, so results are bit for bit those of the unshielded recurrence.
template <class S>
class UnseenValueShield {
 public:
  using Matrix = typename BasicHeadGroup<S>::Matrix;

  explicit UnseenValueShield(const BasicHeadGroup<S>& g) : caller_(g) {
    if (g.visible.empty()) return;
    const auto [lo, hi] = std::minmax_element(g.visible.begin(), g.visible.end());
    for (Eigen::Index j = *lo; j < *hi; ++j) {
      for (Eigen::Index c = 0; c < g.v.cols(); ++c) {
        if (!std::isfinite(g.v(j, c))) unseen_.push_back({j, c, g.v(j, c)});
      }
    }
    if (unseen_.empty()) return;
    v_own_ = g.v.topRows(*hi);
    for (const Entry& e : unseen_) v_own_(e.key, e.col) = S{0};
    shielded_.emplace(BasicHeadGroup<S>{g.q, g.k.topRows(*hi), v_own_, g.visible, g.scale});
  }
  UnseenValueShield(const UnseenValueShield&) = delete;
  UnseenValueShield& operator=(const UnseenValueShield&) = delete;

  /// The group the recurrence runs on.
  const BasicHeadGroup<S>& group() const { return shielded_ ? *shielded_ : caller_; }

  /// Adds the set-aside values to the outputs of the rows that see them.
  template <class Out>
  void restore(Out& out) const {
    for (const Entry& e : unseen_) {
      for (Eigen::Index r = 0; r < caller_.rows(); ++r) {
        if (caller_.visible_keys(r) > e.key) out(r, e.col) += e.value;
      }
    }
  }

 private:
  struct Entry {
    Eigen::Index key, col;
    S value;
  };
  const BasicHeadGroup<S>& caller_;
  std::vector<Entry> unseen_;
  Matrix v_own_;
  std::optional<BasicHeadGroup<S>> shielded_;
};

/// Ends every row of a float recurrence's outputs by its row_end (problem/conventions.hpp, rules 2
/// and 4): an empty row gets out 0 and lse empty_row_lse, a lost row out and lse NaN, and a normal
/// row is handed to `normalise(r, l)`, which divides row r of the recurrence's accumulator into
/// out as the recurrence does and returns the row's lse. `sum_of(r)` is the row's softmax sum l.
template <class SumOf, class Normalise>
void end_rows(const HeadGroup& g, Eigen::Ref<MatrixF> out, std::span<float> lse, SumOf sum_of,
              Normalise normalise) {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  for (Eigen::Index r = 0; r < g.rows(); ++r) {
    const auto ri = static_cast<std::size_t>(r);
    const float l = sum_of(r);
    switch (row_end_of(g.visible_keys(r), l)) {
      case row_end::empty:  // no key seen: the empty sum
        out.row(r).setZero();
        lse[ri] = empty_row_lse;
        break;
      case row_end::lost:
        out.row(r).setConstant(nan);
        lse[ri] = nan;
        break;
      case row_end::normal:
        lse[ri] = normalise(r, l);
        break;
    }
  }
}

/// A copy of m rounded to the operand format of `gather` (round_bf16 or round_fp16).
template <class D>
MatrixF rounded_for(const Eigen::MatrixBase<D>& m, operand_gather gather) {
  return gather == operand_gather::round_fp16 ? rounded_fp16(m) : rounded_bf16(m);
}

/// The operands of a head group as the matrix unit sees them: with operand_gather::round_bf16 or
/// round_fp16 rounded copies of Q and of the keys and values some row sees, otherwise the
/// caller's memory. Keys past every row's window are left out either way (they are never read
/// and need not be finite). group() is the head group a recurrence's core runs on.
class MatrixUnitOperands {
 public:
  MatrixUnitOperands(const HeadGroup& g, operand_gather gather)
      : round_(gather != operand_gather::as_stored),
        n_(max_visible_keys(g)),
        q_own_(round_ ? rounded_for(g.q, gather) : MatrixF()),
        k_own_(round_ ? rounded_for(g.k.topRows(n_), gather) : MatrixF()),
        v_own_(round_ ? rounded_for(g.v.topRows(n_), gather) : MatrixF()),
        group_{round_ ? Eigen::Ref<const MatrixF>(q_own_) : g.q,
               round_ ? Eigen::Ref<const MatrixF>(k_own_) : g.k.topRows(n_),
               round_ ? Eigen::Ref<const MatrixF>(v_own_) : g.v.topRows(n_), g.visible, g.scale} {}
  MatrixUnitOperands(const MatrixUnitOperands&) = delete;
  MatrixUnitOperands& operator=(const MatrixUnitOperands&) = delete;

  const HeadGroup& group() const { return group_; }

 private:
  bool round_;
  Eigen::Index n_;
  MatrixF q_own_, k_own_, v_own_;
  HeadGroup group_;
};

/// The cast of P (a recurrence's probabilities, exp of non-positive numbers, so finite unless
/// the row is lost anyway) before its P V product, in place: to BF16 in bf16 mode, to FP16 in
/// fp16 mode (small weights become FP16 subnormals or 0, as on the hardware), none in float32.
inline void cast_p_inplace(float* p, Eigen::Index n, precision mode) {
  if (mode == precision::bf16) round_bf16_finite_inplace(p, n);
  if (mode == precision::fp16) round_fp16_inplace(p, n);
}

/// The same cast on a matrix of probabilities (NaN-preserving, as the recurrences' matrices may
/// hold a lost row's NaN).
template <class D>
void cast_p_inplace(Eigen::DenseBase<D>& p, precision mode) {
  if (mode == precision::bf16) round_bf16_inplace(p);
  if (mode == precision::fp16) round_fp16_inplace(p);
}

/// The dense entry point of recurrence R (named `fn`): validates the head group, the shapes of
/// the outputs and the options (named "options"), then runs `core` on the group's operands as the
/// matrix unit sees them and returns what it returns.
template <class R, class Core>
decltype(auto) run_dense(const char* fn, const HeadGroup& g, const typename R::Options& options,
                         Eigen::Index out_rows, Eigen::Index out_cols, std::size_t lse_size,
                         Core&& core) {
  validate_head_group(fn, g, out_rows, out_cols, lse_size);
  R::validate(fn, "options", options);
  const MatrixUnitOperands ops(g, R::gather(options));
  return core(ops.group());
}

/// A recurrence's owned result over one head group: `fill(out, lse)` writes the outputs (and
/// returns the report when there is one).
template <class Scalar, class Report = NoReport, class Fill>
AttentionResult<Scalar, Report> owned_result(const HeadGroup& g, Fill&& fill) {
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  AttentionResult<Scalar, Report> r{
      Matrix(g.rows(), g.d_v()), Eigen::Matrix<Scalar, Eigen::Dynamic, 1>(g.rows()), {}};
  const std::span<Scalar> lse(r.lse.data(), static_cast<std::size_t>(g.rows()));
  if constexpr (std::is_same_v<Report, NoReport>) {
    fill(Eigen::Ref<Matrix>(r.out), lse);
  } else {
    r.report = fill(Eigen::Ref<Matrix>(r.out), lse);
  }
  return r;
}

/// The descriptor of a recurrence (see the file comment) with its options, output scalar and
/// report. The defaults fit options that are a RecurrenceOptions; a descriptor hides what differs,
/// adds its names and its `core`, a template (config.hpp, "Compiled where called") so that only a
/// unit that runs the recurrence compiles it.
template <class OptionsT, class ScalarT = float, class ReportT = NoReport>
struct Recurrence {
  using Options = OptionsT;
  using Scalar = ScalarT;
  using Report = ReportT;
  static void validate(const char* fn, std::string_view prefix, const Options& o) {
    validate_recurrence_options(fn, prefix, o);
  }
  static operand_gather gather(const Options& o) { return gather_for(o.mode); }
};

/// The paged decode entry point of recurrence R (see the file comment), as one callable object:
///   xxx_decode(inputs, options, outputs, recurrence_options = {})   into caller buffers; returns
///                                                                    R's report, if it has one
///   xxx_decode(inputs, options = {}, recurrence_options = {})        into a ReportedDecodeResult
/// Both validate everything before writing or allocating.
template <class R>
struct DecodeEntry {
  using Options = typename R::Options;
  using Scalar = typename R::Scalar;
  using Report = typename R::Report;
  static constexpr bool reports = !std::is_same_v<Report, NoReport>;

  template <decode_source In, class OutT, class LseT>
  auto operator()(const In& in, const DecodeOptions& options,
                  const DecodeOutputs<OutT, LseT>& outputs, const Options& recurrence = {}) const {
    using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    R::validate(R::decode_name, R::options_name, recurrence);
    Report report{};
    std::mutex report_mutex;
    run_decode<Scalar>(R::decode_name, in, options, outputs, R::gather(recurrence),
                       [&](const HeadGroup& g, const GroupLocation& at, Eigen::Ref<Matrix> out,
                           std::span<Scalar> lse) {
                         if constexpr (reports) {
                           Report part{};
                           R::core(g, recurrence, out, lse, part);
                           R::place(part, at);
                           const std::lock_guard<std::mutex> lock(report_mutex);
                           R::merge(report, std::move(part));
                         } else {
                           R::core(g, recurrence, out, lse);
                         }
                       });
    if constexpr (reports) {
      R::finish(report);
      return report;
    }
  }

  template <decode_source In>
  ReportedDecodeResult<Scalar, Report> operator()(const In& in, const DecodeOptions& options = {},
                                                  const Options& recurrence = {}) const {
    validate_decode(R::decode_name, in, options);
    R::validate(R::decode_name, R::options_name, recurrence);
    ReportedDecodeResult<Scalar, Report> result(in.shape);
    if constexpr (reports) {
      result.report = (*this)(in, options, result.view(), recurrence);
    } else {
      (*this)(in, options, result.view(), recurrence);
    }
    return result;
  }
};

}  // namespace amla::attention::detail
