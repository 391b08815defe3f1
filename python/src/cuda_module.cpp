// python/src/cuda_module.cpp: the amla._amla_cuda extension module (built with the CUDA backend):
// decode and golden over CUDA tensors taken through DLPack without a copy (torch CUDA tensors,
// CuPy arrays, anything with __dlpack__), checked on the host before any launch. The launches
// themselves are in cuda_bridge.cu (nvcc); this file stays with the host compiler.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/problem/shape.hpp"
#include "cuda_bridge.hpp"

namespace amla::python {
namespace {

namespace nb = nanobind;
namespace cb = cuda_bridge;

/// Any array with __dlpack__; the device, dtype, shape and layout are checked here, so that a
/// wrong one is a ValueError naming it rather than nanobind's generic TypeError.
using Array = nb::ndarray<>;

const char* dtype_name(const nb::dlpack::dtype& d) {
  if (d.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat) && d.bits == 16) {
    return "bfloat16";
  }
  if (d == nb::dtype<float>()) return "float32";
  if (d == nb::dtype<double>()) return "float64";
  if (d == nb::dtype<std::int32_t>()) return "int32";
  if (d == nb::dtype<std::uint8_t>()) return "uint8";
  return "another dtype";
}

std::string shape_text(const Array& a) {
  std::string s = "(";
  for (std::size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

/// Checks that `a` is a C-contiguous CUDA array of `ndim` dimensions and dtype `want` (a
/// dtype_name), and returns its data pointer.
void* check(const char* fn, const char* arg, const Array& a, std::size_t ndim, const char* want) {
  if (a.device_type() != nb::device::cuda::value) {
    amla::detail::throw_invalid(fn, arg, "an array on another device",
                                "must be a CUDA array (a torch CUDA tensor, say)");
  }
  if (std::string(dtype_name(a.dtype())) != want) {
    amla::detail::throw_invalid(fn, arg, dtype_name(a.dtype()), std::string("must be ") + want);
  }
  if (a.ndim() != ndim) {
    amla::detail::throw_invalid(fn, arg, "shape " + shape_text(a),
                                "must have " + std::to_string(ndim) + " dimensions");
  }
  std::int64_t stride = 1;
  for (std::size_t i = ndim; i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != stride) {
      amla::detail::throw_invalid(fn, arg, "a strided view of shape " + shape_text(a),
                                  "must be C-contiguous (call .contiguous())");
    }
    stride *= static_cast<std::int64_t>(a.shape(i));
  }
  return a.data();
}

int dim(const Array& a, std::size_t i) {
  return static_cast<int>(a.shape(i));
}

/// The inputs as the bridge takes them, the shape read off the arrays (q [batch, s_q, h_q, d_qk],
/// kv [num_pages, page_size, h_kv, d_qk], v None or [num_pages, page_size, h_kv, d_v],
/// block_table [batch, max_pages], seqlens [batch]), d_v from v or the argument.
cb::Inputs inputs(const char* fn, const Array& q, const Array& kv, const Array& block_table,
                  const Array& seqlens, const std::optional<Array>& v, std::optional<int> d_v) {
  cb::Inputs in;
  in.q = check(fn, "q", q, 4, "bfloat16");
  in.kv = check(fn, "kv", kv, 4, "bfloat16");
  in.block_table =
      static_cast<const std::int32_t*>(check(fn, "block_table", block_table, 2, "int32"));
  in.seqlens = static_cast<const std::int32_t*>(check(fn, "seqlens", seqlens, 1, "int32"));
  DecodeShape& s = in.shape;
  s.batch = dim(q, 0);
  s.s_q = dim(q, 1);
  s.h_q = dim(q, 2);
  s.d_qk = dim(q, 3);
  s.num_pages = dim(kv, 0);
  s.page_size = dim(kv, 1);
  s.h_kv = dim(kv, 2);
  s.max_pages_per_seq = dim(block_table, 1);
  if (dim(kv, 3) != s.d_qk) {
    amla::detail::throw_invalid(fn, "kv", "shape " + shape_text(kv),
                                "must end in d_qk = " + std::to_string(s.d_qk) + " (q's last)");
  }
  if (dim(block_table, 0) != s.batch) {
    amla::detail::throw_invalid(fn, "block_table", "shape " + shape_text(block_table),
                                "must have batch = " + std::to_string(s.batch) + " rows");
  }
  if (dim(seqlens, 0) != s.batch) {
    amla::detail::throw_invalid(fn, "seqlens", "shape " + shape_text(seqlens),
                                "must hold batch = " + std::to_string(s.batch) + " lengths");
  }
  if (v) {
    in.v = check(fn, "v", *v, 4, "bfloat16");
    s.d_v = dim(*v, 3);
    if (dim(*v, 0) != s.num_pages || dim(*v, 1) != s.page_size || dim(*v, 2) != s.h_kv) {
      amla::detail::throw_invalid(fn, "v", "shape " + shape_text(*v),
                                  "must be [num_pages, page_size, h_kv, d_v] like kv");
    }
    if (d_v && *d_v != s.d_v) {
      amla::detail::throw_invalid(fn, "d_v", std::to_string(*d_v),
                                  "must equal v's last dimension " + std::to_string(s.d_v));
    }
  } else {
    if (!d_v) {
      amla::detail::throw_invalid(fn, "d_v", "None",
                                  "must be given when V is the first d_v columns of kv (MLA: 512)");
    }
    s.d_v = *d_v;
  }
  return in;
}

void check_outputs(const char* fn, const DecodeShape& s, const Array& out, const Array& lse,
                   const char* out_dtype, const char* lse_dtype) {
  check(fn, "out", out, 4, out_dtype);
  check(fn, "lse", lse, 3, lse_dtype);
  if (dim(out, 0) != s.batch || dim(out, 1) != s.s_q || dim(out, 2) != s.h_q ||
      dim(out, 3) != s.d_v) {
    amla::detail::throw_invalid(fn, "out", "shape " + shape_text(out),
                                "must be [batch, s_q, h_q, d_v]");
  }
  if (dim(lse, 0) != s.batch || dim(lse, 1) != s.h_q || dim(lse, 2) != s.s_q) {
    amla::detail::throw_invalid(fn, "lse", "shape " + shape_text(lse), "must be [batch, h_q, s_q]");
  }
}

/// A caller's workspace (a 1-D uint8 CUDA array) as the bridge takes it: pointer and bytes.
std::pair<void*, std::size_t> workspace_of(const char* fn, const std::optional<Array>& ws) {
  if (!ws) return {nullptr, 0};
  void* p = check(fn, "workspace", *ws, 1, "uint8");
  return {p, ws->shape(0)};
}

}  // namespace
}  // namespace amla::python

NB_MODULE(_amla_cuda, m) {
  namespace nb = nanobind;
  using namespace amla::python;
  using nb::arg;
  m.doc() = "amla's CUDA backend over DLPack CUDA arrays (see amla.cuda)";
  nb::class_<cuda_bridge::Plan>(m, "Plan",
                                "a sized split-KV schedule in device memory (amla.cuda.DecodePlan)")
      .def_ro("batch", &cuda_bridge::Plan::batch)
      .def_ro("s_q", &cuda_bridge::Plan::s_q)
      .def_ro("h_q", &cuda_bridge::Plan::h_q)
      .def_ro("block_keys", &cuda_bridge::Plan::block_keys)
      .def_ro("slots", &cuda_bridge::Plan::slots)
      .def_ro("memory", &cuda_bridge::Plan::memory);
  m.def(
      "decode",
      [](const Array& q, const Array& kv, const Array& block_table, const Array& seqlens,
         const Array& out, const Array& lse, std::optional<Array> v, std::optional<int> d_v,
         bool causal, std::optional<float> softmax_scale, std::string mode, std::string kernel,
         std::string rescale, bool skip_unmoved, int num_splits, bool check_tables,
         std::optional<Array> workspace, std::optional<cuda_bridge::Plan> plan,
         std::uintptr_t stream) {
        const char* fn = "amla.cuda.decode";
        const cuda_bridge::Inputs in = inputs(fn, q, kv, block_table, seqlens, v, d_v);
        check_outputs(fn, in.shape, out, lse, "bfloat16", "float32");
        cuda_bridge::DecodeOptions o;
        o.causal = causal;
        o.softmax_scale = softmax_scale;
        o.mode = std::move(mode);
        o.kernel = std::move(kernel);
        o.rescale = std::move(rescale);
        o.skip_unmoved = skip_unmoved;
        o.num_splits = num_splits;
        o.check_tables = check_tables;
        std::tie(o.workspace, o.workspace_bytes) = workspace_of(fn, workspace);
        o.plan = plan;
        cuda_bridge::Launch l;
        {
          nb::gil_scoped_release release;
          l = cuda_bridge::decode(in, out.data(), static_cast<float*>(lse.data()), o, stream);
        }
        nb::dict d;
        d["kernel"] = l.kernel;
        d["pieces"] = l.pieces;
        d["fallback_reason"] = l.fallback_reason;
        return d;
      },
      arg("q"), arg("kv"), arg("block_table"), arg("seqlens"), arg("out"), arg("lse"),
      arg("v").none() = nb::none(), arg("d_v").none() = nb::none(), arg("causal") = false,
      arg("softmax_scale").none() = nb::none(), arg("mode") = "standard",
      arg("kernel") = "automatic", arg("rescale") = "hardware", arg("skip_unmoved") = false,
      arg("num_splits") = 0, arg("check_tables") = true, arg("workspace").none() = nb::none(),
      arg("plan").none() = nb::none(), arg("stream") = 0);
  m.def(
      "workspace_bytes",
      [](const Array& q, const Array& kv, const Array& block_table, const Array& seqlens,
         std::optional<Array> v, std::optional<int> d_v, int num_splits) {
        const cuda_bridge::Inputs in =
            inputs("amla.cuda.workspace_bytes", q, kv, block_table, seqlens, v, d_v);
        return cuda_bridge::workspace_bytes(in, num_splits);
      },
      arg("q"), arg("kv"), arg("block_table"), arg("seqlens"), arg("v").none() = nb::none(),
      arg("d_v").none() = nb::none(), arg("num_splits") = 0);
  m.def(
      "plan_decode",
      [](const Array& q, const Array& kv, const Array& block_table, const Array& seqlens,
         const Array& workspace, std::optional<Array> v, std::optional<int> d_v, bool check_tables,
         std::uintptr_t stream) {
        const char* fn = "amla.cuda.plan_decode";
        const cuda_bridge::Inputs in = inputs(fn, q, kv, block_table, seqlens, v, d_v);
        const auto [ws, bytes] = workspace_of(fn, workspace);
        nb::gil_scoped_release release;
        return cuda_bridge::plan_decode(in, ws, bytes, check_tables, stream);
      },
      arg("q"), arg("kv"), arg("block_table"), arg("seqlens"), arg("workspace"),
      arg("v").none() = nb::none(), arg("d_v").none() = nb::none(), arg("check_tables") = true,
      arg("stream") = 0);
  m.def(
      "golden",
      [](const Array& q, const Array& kv, const Array& block_table, const Array& seqlens,
         const Array& out, const Array& lse, std::optional<Array> v, std::optional<int> d_v,
         bool causal, std::optional<float> softmax_scale, bool check_tables,
         std::uintptr_t stream) {
        const char* fn = "amla.cuda.golden";
        const cuda_bridge::Inputs in = inputs(fn, q, kv, block_table, seqlens, v, d_v);
        check_outputs(fn, in.shape, out, lse, "float64", "float64");
        nb::gil_scoped_release release;
        cuda_bridge::golden(in, static_cast<double*>(out.data()), static_cast<double*>(lse.data()),
                            causal, softmax_scale, check_tables, stream);
      },
      arg("q"), arg("kv"), arg("block_table"), arg("seqlens"), arg("out"), arg("lse"),
      arg("v").none() = nb::none(), arg("d_v").none() = nb::none(), arg("causal") = false,
      arg("softmax_scale").none() = nb::none(), arg("check_tables") = true, arg("stream") = 0);
}
