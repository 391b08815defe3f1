// python/src/cuda_bridge.cu: see cuda_bridge.hpp.
#include "amla/backend/cuda/cuda.cuh"
#include "cuda_bridge.hpp"

#include "amla/numeric/pow2.hpp"

namespace amla::python::cuda_bridge {
namespace {

namespace ac = amla::cuda;

ac::DeviceDecodeInputs device_inputs(const Inputs& in) {
  return ac::DeviceDecodeInputs{.shape = in.shape,
                                .q = static_cast<const bf16*>(in.q),
                                .kv = static_cast<const bf16*>(in.kv),
                                .v = static_cast<const bf16*>(in.v),
                                .block_table = in.block_table,
                                .seqlens = in.seqlens};
}

template <class T>
T choose(const char* arg, const std::string& text,
         std::initializer_list<std::pair<const char*, T>> choices) {
  std::string names = "must be one of ";
  bool first = true;
  for (const auto& [name, value] : choices) {
    if (text == name) return value;
    names.append(first ? "'" : ", '").append(name).append("'");
    first = false;
  }
  std::string given = "'";
  given.append(text).append("'");
  amla::detail::throw_invalid("amla.cuda.decode", arg, given, names);
}

ac::DecodePlan device_plan(const Plan& p) {
  return ac::DecodePlan{.batch = p.batch,
                        .s_q = p.s_q,
                        .h_q = p.h_q,
                        .block_keys = p.block_keys,
                        .slots = p.slots,
                        .memory = reinterpret_cast<const void*>(p.memory)};
}

}  // namespace

Launch decode(const Inputs& in, void* out, float* lse, const DecodeOptions& options,
              std::uintptr_t stream) {
  ac::CudaDecodeOptions o;
  o.causal = options.causal;
  o.softmax_scale = options.softmax_scale;
  o.mode = choose<ac::rescale_mode>(
      "mode", options.mode,
      {{"standard", ac::rescale_mode::standard}, {"amla", ac::rescale_mode::amla}});
  o.kernel = choose<ac::kernel_kind>("kernel", options.kernel,
                                     {{"automatic", ac::kernel_kind::automatic},
                                      {"simple", ac::kernel_kind::simple},
                                      {"hopper", ac::kernel_kind::hopper}});
  o.rescale = choose<pow2_mode>("rescale", options.rescale,
                                {{"hardware", pow2_mode::hardware}, {"safe", pow2_mode::safe}});
  o.skip_unmoved = options.skip_unmoved;
  o.num_splits = options.num_splits;
  o.check_tables = options.check_tables;
  o.workspace = options.workspace;
  o.workspace_bytes = options.workspace_bytes;
  ac::DecodePlan plan;
  if (options.plan) {
    plan = device_plan(*options.plan);
    o.plan = &plan;
  }
  const ac::DecodeLaunch l = ac::decode(device_inputs(in), {static_cast<bf16*>(out), lse}, o,
                                        reinterpret_cast<cudaStream_t>(stream));
  return Launch{ac::to_string(l.kernel), l.pieces, l.fallback_reason};
}

std::size_t workspace_bytes(const Inputs& in, int num_splits) {
  ac::CudaDecodeOptions o;
  o.num_splits = num_splits;
  return ac::decode_workspace_bytes(in.shape, o);
}

Plan plan_decode(const Inputs& in, void* workspace, std::size_t bytes, bool check_tables,
                 std::uintptr_t stream) {
  ac::CudaDecodeOptions o;
  o.workspace = workspace;
  o.workspace_bytes = bytes;
  o.check_tables = check_tables;
  const ac::DecodePlan p =
      ac::plan_decode(device_inputs(in), o, reinterpret_cast<cudaStream_t>(stream));
  return Plan{.batch = p.batch,
              .s_q = p.s_q,
              .h_q = p.h_q,
              .block_keys = p.block_keys,
              .slots = p.slots,
              .memory = reinterpret_cast<std::uintptr_t>(p.memory)};
}

void golden(const Inputs& in, double* out, double* lse, bool causal,
            std::optional<float> softmax_scale, bool check_tables, std::uintptr_t stream) {
  ac::CudaGoldenOptions o{
      .causal = causal, .softmax_scale = softmax_scale, .check_tables = check_tables};
  ac::golden_decode(device_inputs(in), {out, lse}, o, reinterpret_cast<cudaStream_t>(stream));
}

}  // namespace amla::python::cuda_bridge
