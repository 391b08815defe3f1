// python/src/models.cpp: thin bindings of the cost models, for notebooks that sweep: the
// simulator's decode model on a chip preset (sim/decode.hpp) and the MLA roofline cost model of
// the naive / absorb / Typhoon formulations (mla/cost.hpp). Plain values in, dicts out.
#include <cstdint>
#include <string>
#include <vector>

#include "amla/mla/cost.hpp"
#include "amla/mla/presets.hpp"
#include "amla/mla/roofline.hpp"
#include "amla/sim/chip.hpp"
#include "amla/problem/workload.hpp"
#include "amla/sim/decode.hpp"
#include "common.hpp"

#include <nanobind/stl/vector.h>

namespace amla::python {
namespace {

sim::Chip chip_preset(const char* fn, const std::string& name) {
  if (name == "ascend910") return sim::ascend910();
  if (name == "typhoon_npu") return sim::typhoon_npu();
  invalid(fn, "chip", "'" + name + "'", "must be 'ascend910' or 'typhoon_npu'");
}

nb::dict simulate_decode(const std::string& chip, const std::vector<int>& seqlens, int s_q, int h_q,
                         int d_qk, int d_v, bool causal, int kv_block, const std::string& variant,
                         const std::string& schedule, int max_rows_per_task) {
  const char* fn = "amla.sim.decode";
  const sim::Chip c = chip_preset(fn, chip);
  Workload w;
  w.seqlens = seqlens;
  w.s_q = s_q;
  w.h_q = h_q;
  w.d_qk = d_qk;
  w.d_v = d_v;
  w.causal = causal;
  sim::DecodeOptions o;
  o.kv_block = kv_block;
  if (variant == "amla") {
    o.variant = sim::Variant::amla;
  } else if (variant == "base") {
    o.variant = sim::Variant::base;
  } else {
    invalid(fn, "variant", "'" + variant + "'", "must be 'amla' or 'base'");
  }
  if (schedule == "automatic") {
    o.schedule = sim::DecodeSchedule::automatic;
  } else if (schedule == "serial") {
    o.schedule = sim::DecodeSchedule::serial;
  } else if (schedule == "preload") {
    o.schedule = sim::DecodeSchedule::preload;
  } else if (schedule == "theorem_b1") {
    o.schedule = sim::DecodeSchedule::theorem_b1;
  } else {
    invalid(fn, "schedule", "'" + schedule + "'",
            "must be 'automatic', 'serial', 'preload' or 'theorem_b1'");
  }
  o.max_rows_per_task = max_rows_per_task;
  sim::DecodeResult r;
  {
    nb::gil_scoped_release release;
    r = sim::simulate_decode(c, w, o);
  }
  nb::dict d;
  d["ok"] = r.ok;
  d["reason"] = r.reason;
  d["cycles"] = r.cycles.count;
  d["time_us"] = r.time.us();
  d["flops"] = r.flops;
  d["fu"] = r.fu;
  d["hbm_bytes"] = r.hbm_bytes.count;
  d["hbm_utilization"] = r.hbm_utilization;
  d["tasks"] = r.tasks;
  d["rows_per_task"] = r.rows_per_task;
  d["blocks_per_task"] = r.blocks_per_task;
  d["cores_used"] = r.cores_used;
  nb::list pipes;
  for (const sim::PipeSummary& p : r.pipes) {
    nb::dict e;
    e["pipe"] = p.pipe;
    e["busy"] = p.busy;
    e["stalled_on_data"] = p.stalled_on_data;
    e["stalled_on_buffer"] = p.stalled_on_buffer;
    e["idle"] = p.idle;
    pipes.append(e);
  }
  d["pipes"] = pipes;
  return d;
}

mla::MlaDims model_preset(const char* fn, const std::string& name) {
  if (name == "deepseek_v3") return mla::presets::deepseek_v3;
  if (name == "kimi_k2") return mla::presets::kimi_k2;
  invalid(fn, "model", "'" + name + "'", "must be 'deepseek_v3' or 'kimi_k2'");
}

mla::Hardware hardware_preset(const char* fn, const std::string& name) {
  if (name == "ascend910") return mla::hardware::ascend910;
  if (name == "typhoon_npu") return mla::hardware::typhoon_npu;
  if (name == "h100_sxm") return mla::hardware::h100_sxm;
  if (name == "h800_sxm") return mla::hardware::h800_sxm;
  if (name == "h800_sxm_throttled") return mla::hardware::h800_sxm_throttled;
  invalid(fn, "hardware", "'" + name + "'",
          "must be 'ascend910', 'typhoon_npu', 'h100_sxm', 'h800_sxm' or 'h800_sxm_throttled'");
}

nb::dict mla_cost(const std::string& formulation, const std::string& model,
                  const std::string& hardware, std::int64_t batch, std::int64_t s_q,
                  std::int64_t prefix_len, std::int64_t suffix_len, double bytes_per_element,
                  bool include_combine) {
  const char* fn = "amla.mla.cost";
  mla::formulation f = mla::formulation::naive;
  if (formulation == "naive") {
    f = mla::formulation::naive;
  } else if (formulation == "absorb") {
    f = mla::formulation::absorb;
  } else if (formulation == "typhoon") {
    f = mla::formulation::typhoon;
  } else {
    invalid(fn, "formulation", "'" + formulation + "'", "must be 'naive', 'absorb' or 'typhoon'");
  }
  const mla::MlaDims dims = model_preset(fn, model);
  const mla::Hardware hw = hardware_preset(fn, hardware);
  const mla::DecodeStep step{batch, s_q, prefix_len, suffix_len};
  mla::validate(step);
  mla::CostOptions opts;
  opts.bytes_per_element = bytes_per_element;
  opts.include_combine = include_combine;
  const mla::FormulationTime t = mla::roofline_time(f, dims, step, hw, opts);
  nb::list kernels;
  for (const mla::KernelTime& k : t.kernels) {
    nb::dict e;
    e["name"] = std::string(k.name);
    e["macs"] = k.work.macs;
    e["hbm_words"] = k.work.hbm_words;
    e["flops"] = k.work.flops();
    e["hbm_bytes"] = k.work.hbm_bytes(bytes_per_element);
    e["compute_s"] = k.time.compute_s;
    e["memory_s"] = k.time.memory_s;
    e["time_s"] = k.time.time_s();
    e["compute_bound"] = k.time.compute_bound();
    kernels.append(e);
  }
  const mla::TyphoonChoice choice = mla::typhoon_choice(dims, step, hw, opts);
  nb::dict d;
  d["formulation"] = std::string(mla::to_string(f));
  d["time_s"] = t.time_s();
  d["kernels"] = kernels;
  d["typhoon_mixed"] = choice.mixed;
  d["typhoon_threshold"] = choice.threshold;
  return d;
}

}  // namespace

void bind_models(nb::module_& m) {
  m.def("_simulate_decode", &simulate_decode, nb::arg("chip"), nb::arg("seqlens"), nb::arg("s_q"),
        nb::arg("h_q"), nb::arg("d_qk"), nb::arg("d_v"), nb::arg("causal"), nb::arg("kv_block"),
        nb::arg("variant"), nb::arg("schedule"), nb::arg("max_rows_per_task"));
  m.def("_mla_cost", &mla_cost, nb::arg("formulation"), nb::arg("model"), nb::arg("hardware"),
        nb::arg("batch"), nb::arg("s_q"), nb::arg("prefix_len"), nb::arg("suffix_len"),
        nb::arg("bytes_per_element"), nb::arg("include_combine"));
}

}  // namespace amla::python
