// amla/sim/status.hpp: the simulator's one answer to "can this run, and if not, why" (Timeloop's
// EvalStatus{success, fail_reason}). A tiling that does not fit its buffers, a Cycle whose
// stages overlap, a schedule that deadlocks, a decode kernel that cannot be mapped: all are valid
// questions with a "no" for an answer, so they come back as a Status (or a result deriving from
// it) rather than as an exception. Malformed input (a negative size, an index out of range) is
// still an amla::invalid_argument.
#pragma once

#include <string>
#include <utility>

namespace amla::sim {

/// ok, or the first rule broken (`reason` names the stage, task or buffer at fault).
struct Status {
  bool ok = true;
  std::string reason;  ///< empty when ok

  explicit operator bool() const { return ok; }

  static Status success() { return Status{}; }
  static Status fail(std::string why) { return Status{false, std::move(why)}; }
  /// Marks this status failed with `why` (for results that derive from Status).
  void set_failed(std::string why) {
    ok = false;
    reason = std::move(why);
  }
  /// The Status part of a result that derives from it.
  const Status& status() const { return *this; }
};

}  // namespace amla::sim
