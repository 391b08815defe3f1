// python/src/models.cpp: thin bindings of the cost models, for notebooks that sweep: the
// simulator's decode model on a chip preset (sim/decode.hpp) and the MLA roofline cost model of
// the naive / absorb / Typhoon formulations (mla/cost.hpp). Plain values in, dicts out.
#include <cstdint>
#include <string>
#include <vector>

#include "amla/mla/cost.hpp"
#include "amla/mla/presets.hpp"
#include "amla/mla/roofline.hpp"
#include "amla/problem/workload.hpp"
#include "amla/sim/chip.hpp"
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
  const Workload w{
      .s_q = s_q, .h_q = h_q, .d_qk = d_qk, .d_v = d_v, .causal = causal, .seqlens = seqlens};
  sim::DecodeOptions o;
  o.kv_block = kv_block;
  o.variant = parse_choice<sim::Variant>(
      fn, "variant", variant, {{"amla", sim::Variant::amla}, {"base", sim::Variant::base}});
  o.schedule = parse_choice<sim::DecodeSchedule>(fn, "schedule", schedule,
                                                 {{"automatic", sim::DecodeSchedule::automatic},
                                                  {"serial", sim::DecodeSchedule::serial},
                                                  {"preload", sim::DecodeSchedule::preload},
                                                  {"theorem_b1", sim::DecodeSchedule::theorem_b1}});
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
  using P = sim::PipeSummary;
  for (const P& p : r.pipes) {
    pipes.append(fields(p, std::pair{"pipe", &P::pipe}, std::pair{"busy", &P::busy},
                        std::pair{"stalled_on_data", &P::stalled_on_data},
                        std::pair{"stalled_on_buffer", &P::stalled_on_buffer},
                        std::pair{"idle", &P::idle}));
  }
  d["pipes"] = pipes;
  return d;
}

mla::MlaDims model_preset(const char* fn, const std::string& name) {
  return parse_choice<mla::MlaDims>(
      fn, "model", name,
      {{"deepseek_v3", mla::presets::deepseek_v3}, {"kimi_k2", mla::presets::kimi_k2}});
}

mla::Hardware hardware_preset(const char* fn, const std::string& name) {
  return parse_choice<mla::Hardware>(fn, "hardware", name,
                                     {{"ascend910", mla::hardware::ascend910},
                                      {"typhoon_npu", mla::hardware::typhoon_npu},
                                      {"h100_sxm", mla::hardware::h100_sxm},
                                      {"h800_sxm", mla::hardware::h800_sxm},
                                      {"h800_sxm_throttled", mla::hardware::h800_sxm_throttled}});
}

nb::dict mla_cost(const std::string& formulation, const std::string& model,
                  const std::string& hardware, std::int64_t batch, std::int64_t s_q,
                  std::int64_t prefix_len, std::int64_t suffix_len, double bytes_per_element,
                  bool include_combine) {
  const char* fn = "amla.mla.cost";
  const mla::formulation f =
      parse_choice<mla::formulation>(fn, "formulation", formulation,
                                     {{"naive", mla::formulation::naive},
                                      {"absorb", mla::formulation::absorb},
                                      {"typhoon", mla::formulation::typhoon}});
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
