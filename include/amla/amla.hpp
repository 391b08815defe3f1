// amla/amla.hpp: the umbrella header. Every CPU header of amla, never a device backend.
#pragma once

#include "amla/config.hpp"

#include "amla/numeric/bf16.hpp"
#include "amla/numeric/bits.hpp"
#include "amla/numeric/gemm.hpp"
#include "amla/numeric/one_plus_eps.hpp"
#include "amla/numeric/pow2.hpp"

#include "amla/mla/absorb.hpp"
#include "amla/mla/arithmetic_intensity.hpp"
#include "amla/mla/cost.hpp"
#include "amla/mla/decode_problem.hpp"
#include "amla/mla/decompress.hpp"
#include "amla/mla/model.hpp"
#include "amla/mla/naive.hpp"
#include "amla/mla/presets.hpp"
#include "amla/mla/problem_builder.hpp"
#include "amla/mla/roofline.hpp"
#include "amla/mla/typhoon.hpp"
