// amla/amla.hpp: the umbrella header. Every CPU header of amla, never a device backend.
#pragma once

#include "amla/config.hpp"

#include "amla/numeric/bf16.hpp"
#include "amla/numeric/bits.hpp"
#include "amla/numeric/gemm.hpp"
#include "amla/numeric/one_plus_eps.hpp"
#include "amla/numeric/pow2.hpp"

#include "amla/attention/amla.hpp"
#include "amla/attention/decode_problem.hpp"
#include "amla/attention/golden.hpp"
#include "amla/attention/head_group.hpp"
#include "amla/attention/online_softmax.hpp"
#include "amla/attention/problem_builder.hpp"
#include "amla/attention/seesaw.hpp"
#include "amla/attention/split_kv.hpp"
#include "amla/attention/transposed.hpp"

#include "amla/sim/calibration.hpp"
#include "amla/sim/chip.hpp"
#include "amla/sim/cube_stage.hpp"
#include "amla/sim/decode.hpp"
#include "amla/sim/engine.hpp"
#include "amla/sim/pipeline.hpp"
#include "amla/sim/preload_theory.hpp"
#include "amla/sim/tiling.hpp"
#include "amla/sim/timeline.hpp"
#include "amla/sim/trace.hpp"
#include "amla/sim/units.hpp"
