// amla/sim/timeline.hpp: what a simulation produced, as lanes of busy intervals. The cycle
// engine writes it; the trace writers (Chrome trace JSON, SVG Gantt) and the reports read it.
#pragma once

#include <string>
#include <vector>

#include "amla/sim/units.hpp"

namespace amla::sim {

/// The phase of a pipelined schedule an interval belongs to (AMLA Section 4.1).
enum class Phase { none, preload, steady, drain };

/// One busy interval of one unit: [start, end) in cycles.
struct Interval {
  Cycles start;
  Cycles end;
  std::string name;      ///< what ran, e.g. "C1[3]" (stage C1 of KV block 3) or "MMAD m0n1k2"
  std::string category;  ///< the stage kind used for colours: "C1", "V1", "C2", "V2", "MTE2", ...
  Phase phase = Phase::none;
};

/// One unit (a Cube core, a Vector core, a pipe of a core) and everything it did, in time order.
struct Lane {
  std::string name;  ///< e.g. "cube0", "vec0.1", "cube0/MTE2"
  std::vector<Interval> intervals;
};

/// A whole simulation's activity.
struct Timeline {
  std::string title;
  Hertz clock;  ///< to print times in microseconds
  std::vector<Lane> lanes;

  /// The last end over all lanes (the makespan), 0 when empty.
  Cycles makespan() const {
    Cycles m{0};
    for (const auto& lane : lanes)
      for (const auto& iv : lane.intervals)
        if (iv.end > m) m = iv.end;
    return m;
  }
};

}  // namespace amla::sim
