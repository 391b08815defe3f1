// amla/backend/cuda/driver.cuh: MLA/GQA decode on a CUDA GPU, the device mirror of
// attention/driver.hpp: the same tensors, shapes, mask and outputs, as device pointers.
//
// Tensors (row-major, last index fastest), all in device memory, all BF16 except the tables:
//   q            [batch, s_q, h_q, d_qk]
//   kv           [num_pages, page_size, h_kv, d_qk]      the paged K cache
//   v            [num_pages, page_size, h_kv, d_v]       or nullptr: V is the first d_v columns
//                of kv (MLA: d_qk 576 = 512 latent + 64 RoPE, d_v 512)
//   block_table  [batch, max_pages_per_seq] int32, seqlens [batch] int32
//   out          [batch, s_q, h_q, d_v] BF16             lse [batch, h_q, s_q] FP32, natural log
// Semantics exactly as attention/driver.hpp: query head h uses KV head h / (h_q / h_kv);
// with causal = true token t sees keys [0, seqlen - s_q + t]; a row that sees no key (a sequence
// of length 0, or a row masked entirely) gets out = 0 and lse = -inf; only the first
// ceil(seqlen / page_size) block_table entries of a sequence are read, and a key a row does not
// see (past the sequence, or hidden by the causal mask) never contributes to it, whatever its
// cache slot holds, NaN included. Non-finite values a row does see propagate as in the float64
// golden: NaN in its Q row or a visible K row makes its out and lse NaN, NaN in a visible V
// column makes that output column NaN; a score that overflows FP32 makes the row NaN, never the
// empty-row result (problem/conventions.hpp). Exceptions: the AMLA hardware add is the raw add on
// every element, so it turns a non-finite O element into garbage like any element outside
// Lemma 3.1 (attention/amla.hpp keeps Inf and NaN through the add in every mode and locates
// them as violations; the GPU's safe add keeps a NaN and turns an Inf into garbage too). In the
// Hopper kernel (V the first 512 columns of K) a non-finite V value is a non-finite K value, so it
// makes the score of every row that sees it NaN or +-inf; a NaN or +inf score makes the row NaN as
// golden does, but a -inf score (an infinite K value against a query value of the other sign) only
// weighs the key 0, and the NaN golden's 0 * Inf puts in the columns of its infinite values
// survives in the kernel only where no later hardware-form AMLA add reaches it, and not for a key
// a causal mask shows to some rows of a CTA only (detail/hopper_kernel.cuh).
//
// Kernels:
//   simple  any shape: one CTA per query row, FP32 throughout (detail/simple_kernel.cuh).
//   hopper  the DeepSeek shape (d_qk 576, d_v 512, V inside kv, h_kv 1, page size a multiple of
//           64 or 8/16/32; q and kv 16-byte aligned, out 4-byte aligned) on compute capability
//           9.0: wgmma + TMA, two warpgroups, a split-KV
//           tile schedule (problem/split_schedule.hpp, computed on the GPU by
//           detail/split_plan.cuh in each call of a batch smaller than a wave (a larger one is
//           not cut and needs none), or once by plan_decode and reused through
//           CudaDecodeOptions::plan) with an LSE combine, the three kernels chained by programmatic
//           dependent launch (detail/hopper_kernel.cuh documents the schedule).
//   automatic picks hopper when the problem, the device (compute capability 9.0) and the build
//           (an sm_90a target: AMLA_CUDA_ARCHITECTURES holding 90a) allow it, else simple. The
//           simple kernel builds and runs on sm_80 and later: it is the fallback off Hopper.
// Rescaling (rescale.cuh): standard (Base, online_softmax.cuh) or AMLA's integer add (amla.cuh).
//
// Validation. Everything that needs no device is checked first and throws amla::invalid_argument
// naming the argument, its value and the rule: the shape, scale and page tables by the problem
// layer's one validator (problem/validate.hpp: validate_shape, validate_options, validate_tables),
// then what is the GPU's own (null device pointers, the kernel's limits, the CUDA options). With
// check_tables (the default) seqlens and block_table are copied to the host and checked by
// amla::validate_tables; this synchronises the stream, so timing loops turn it off. CUDA failures
// throw amla::cuda::cuda_error naming the call.
#pragma once

#include "amla/backend/cuda/detail/check.cuh"
#include "amla/backend/cuda/detail/combine.cuh"
#include "amla/backend/cuda/detail/dense_reads.cuh"
#include "amla/backend/cuda/detail/hopper_kernel.cuh"
#include "amla/backend/cuda/detail/simple_kernel.cuh"
#include "amla/backend/cuda/detail/split_plan.cuh"
#include "amla/backend/cuda/rescale.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "amla/config.hpp"
#include "amla/detail/enum_name.hpp"
#include "amla/numeric/bf16.hpp"
#include "amla/numeric/pow2.hpp"
#include "amla/problem/options.hpp"
#include "amla/problem/shape.hpp"
#include "amla/problem/split_schedule.hpp"
#include "amla/problem/validate.hpp"

namespace amla::cuda {

/// Device pointers of the inputs (layouts in the file comment and problem/shape.hpp).
struct DeviceDecodeInputs {
  DecodeShape shape;  ///< amla::DecodeShape
  const bf16* q = nullptr;
  const bf16* kv = nullptr;
  const bf16* v = nullptr;  ///< nullptr: V is the first d_v columns of kv
  const std::int32_t* block_table = nullptr;
  const std::int32_t* seqlens = nullptr;

  /// The V cache the kernels read: v, or kv when V is its first d_v columns.
  const bf16* values() const { return v != nullptr ? v : kv; }
  /// Elements between consecutive (page, slot, head) rows of values(): d_v, or d_qk inside kv.
  int value_row_elems() const { return v != nullptr ? shape.d_v : shape.d_qk; }
};

/// Device pointers of the outputs.
struct DeviceDecodeOutputs {
  bf16* out = nullptr;   ///< [batch, s_q, h_q, d_v]
  float* lse = nullptr;  ///< [batch, h_q, s_q], natural log
};

enum class kernel_kind : std::uint8_t { automatic, simple, hopper };

/// L2 eviction priority the Hopper kernel gives the Q and KV cache lines it loads (page sizes
/// >= 64). automatic: the one measured fastest on the Hopper kernel, evict_first at every shape
/// (CudaDecodeOptions::kv_l2_hint).
enum class l2_hint : std::uint8_t { automatic, none, evict_first, evict_last };

namespace detail {
/// The policy a Hopper launch gives its loads (hopper::params::kv_l2_hint: 0 none, 1 evict
/// first, 2 evict last).
inline int l2_policy_of(l2_hint h) {
  switch (h) {
    case l2_hint::none:
      return 0;
    case l2_hint::evict_first:
      return 1;
    case l2_hint::evict_last:
      return 2;
    case l2_hint::automatic:
      break;
  }
  return 1;  // automatic (validate_host refuses any other value)
}
}  // namespace detail

inline const char* to_string(kernel_kind k) {
  return amla::detail::enum_name(k, {"automatic", "simple", "hopper"});
}

struct DecodePlan;

struct CudaDecodeOptions {
  bool causal = false;                   ///< mask aligned to the end (see the file comment)
  std::optional<float> softmax_scale{};  ///< default 1 / sqrt(d_qk); finite and > 0
  rescale_mode mode = rescale_mode::standard;
  kernel_kind kernel = kernel_kind::automatic;
  /// Split-KV of the Hopper kernel (problem/split_schedule.hpp): 0 sizes the pieces from the batch
  /// and the lengths (a batch that fills a wave of CTAs is not cut; a smaller one is cut into one
  /// wave of pieces of about equal length, the longest requests into the most); k in [1, 64]
  /// cuts every request in k equal pieces (1: no split-KV). The simple kernel never splits.
  int num_splits = 0;
  /// Chain the Hopper kernel's plan, decode and combine kernels with programmatic dependent
  /// launch (each starts while the one before finishes). A tuning knob.
  bool pdl = true;
  /// Device memory for the Hopper kernel's split-KV plan and partial outputs, at least
  /// decode_workspace_bytes(shape, options) bytes, 256-byte aligned, used in stream order (a
  /// later decode on the same stream may reuse it). nullptr: decode() allocates it with
  /// cudaMallocAsync and frees it after the launch, which costs a pool allocation per call (and an
  /// OS mapping when the pool has released its memory), as a caching allocator would avoid.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;  ///< the size of `workspace`
  /// Copy seqlens and block_table to the host and validate them (synchronises the stream).
  bool check_tables = true;
  /// Cache policy of the Hopper kernel's Q and KV loads (a tuning knob; results do not depend on
  /// it). Measured on an H100 (bench/CUDA_RESULTS.md, rows 87 and 89): evict-first, which FlashMLA
  /// gives its KV copies, takes 4-9% off the split-KV shapes at s_q 2 (b 16 and b 1, h_q 128), up
  /// to 3.6% off the standard mode at b 128, s_q 2, and 1-4% off both modes at b 128, s_q 1;
  /// automatic takes it.
  l2_hint kv_l2_hint = l2_hint::automatic;
  /// Hopper kernel: the second warpgroup issues its Q K^T only after the first has issued its
  /// own, so that the first one's softmax overlaps it (a tuning knob; results do not change).
  bool stagger_qk = true;
  /// The form of AMLA's integer-add rescale, as attention::AmlaOptions::rescale: hardware is the
  /// raw add, garbage where Lemma 3.1 fails (an O element that is 0 or tiny when a negative
  /// exponent add reaches it); safe keeps the intended value there (numeric/pow2.hpp). checked
  /// needs the CPU recurrence's report and is rejected here. Ignored by the standard mode.
  pow2_mode rescale = pow2_mode::hardware;
  /// AMLA's identity steps (dn = eps = 0: the max did not move) add k = 0 instead of the nudge's
  /// 8, as attention::AmlaOptions::skip_unmoved; the Hopper kernel then skips the add where no row
  /// of a warp moved, as the standard mode skips its multiply. Ignored by the standard mode.
  bool skip_unmoved = false;
  /// A timing build's per-CTA record of the Hopper kernel's phases (bm_cuda_decode --phases):
  /// device memory of hopper::phase_slots words per CTA of the grid, then combine::phase_words
  /// words for the split-KV combine's span, zeroed before the launch, written only by a program
  /// built with AMLA_CUDA_PHASE_TIMES=1 (detail/hopper_kernel.cuh, enum phase; detail/combine.cuh,
  /// enum phase_word). nullptr: none.
  std::uint64_t* phase_times = nullptr;
  /// A sized split-KV schedule made once by plan_decode() and reused (FlashMLA's metadata reused
  /// across layers): decode() then launches no plan kernel and sizes nothing, its CTAs read this
  /// plan; for a batch that fills a wave (not cut) they take its requests longest first, as the
  /// plan lists them, where a call without a plan takes them in index order. It must be of this
  /// call's batch, s_q and h_q on this device, with num_splits 0, and give each request the piece
  /// count its current length needs: with check_tables a plan that does not is refused on the host
  /// (invalid_argument naming options.plan); without, the first CTA that sees it traps. nullptr:
  /// the schedule is sized in this call.
  const DecodePlan* plan = nullptr;
};

/// A sized split-KV schedule on the device, made by plan_decode(): what it was sized for, and the
/// device memory it lies in (the plan region at the start of the workspace it was written to).
struct DecodePlan {
  int batch = 0;
  int s_q = 0;
  int h_q = 0;
  int block_keys = 0;            ///< keys per KV block of the schedule
  int slots = 0;                 ///< the pieces of one wave it was sized for (the device's SMs)
  const void* memory = nullptr;  ///< the plan's device memory (workspace_layout's plan region)
};

/// What decode() launched.
struct DecodeLaunch {
  kernel_kind kernel = kernel_kind::simple;
  int num_splits = 1;  ///< the fixed split count, or 0 for the balanced schedule
  int pieces = 1;      ///< CTAs per row block (the grid's y: the schedule's bound of pieces)
  std::string fallback_reason;  ///< why automatic chose the simple kernel (empty otherwise)
};

namespace detail {

/// The inputs as the reference kernels (simple, golden) read them.
inline dense_reads dense_reads_of(const DeviceDecodeInputs& in) {
  return {.q = reinterpret_cast<const __nv_bfloat16*>(in.q),
          .kv = reinterpret_cast<const __nv_bfloat16*>(in.kv),
          .v = reinterpret_cast<const __nv_bfloat16*>(in.values()),
          .v_row = in.value_row_elems(),
          .block_table = in.block_table,
          .seqlens = in.seqlens};
}

inline constexpr int max_splits = 64;

/// Why the Hopper kernel cannot run this problem (empty: it can). Device-independent part.
inline std::string hopper_unsupported(const DeviceDecodeInputs& in,
                                      const DeviceDecodeOutputs& out) {
  const DecodeShape& s = in.shape;
  if (s.d_qk != hopper::d_qk || s.d_v != hopper::d_v) {
    return "needs d_qk = 576 and d_v = 512 (got " + std::to_string(s.d_qk) + ", " +
           std::to_string(s.d_v) + ")";
  }
  if (in.v != nullptr) return "needs V inside the kv cache (v = nullptr)";
  if (s.h_kv != 1) return "needs h_kv = 1 (got " + std::to_string(s.h_kv) + ")";
  const int ps = s.page_size;
  if (!(ps % 64 == 0 || ps == 8 || ps == 16 || ps == 32)) {
    return "needs page_size a multiple of 64 or one of 8, 16, 32 (got " + std::to_string(ps) + ")";
  }
  if (reinterpret_cast<std::uintptr_t>(in.q) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(in.kv) % 16 != 0) {
    return "needs q and kv 16-byte aligned (TMA)";
  }
  // The epilogue stores two BF16 at a time at least (16 bytes where out's rows allow it).
  if (reinterpret_cast<std::uintptr_t>(out.out) % 4 != 0) {
    return "needs out 4-byte aligned (its BF16 stores are pairs at least)";
  }
  return {};
}

/// Throws amla::invalid_argument naming `name` when p is null.
inline void require_device_pointer(const char* fn, const char* name, const void* p,
                                   const char* layout) {
  if (p == nullptr) {
    amla::detail::throw_invalid(fn, name, "nullptr",
                                std::string("must point to ") + layout + " in device memory");
  }
}

/// Host-only validation of the inputs (no CUDA call): the problem layer's shape check, the
/// kernels' int indexing of cache rows, and null pointers.
inline void validate_inputs(const char* fn, const DeviceDecodeInputs& in) {
  const DecodeShape& s = in.shape;
  validate_shape(fn, s, in.v == nullptr);
  // The kernels index cache rows (page, slot, head) with int.
  if (static_cast<std::int64_t>(s.num_pages) * s.page_size * s.h_kv > INT32_MAX) {
    amla::detail::throw_invalid(fn, "shape.num_pages", std::to_string(s.num_pages),
                                "num_pages * page_size * h_kv must stay below 2^31 (cache rows)");
  }
  require_device_pointer(fn, "q", in.q, "[batch, s_q, h_q, d_qk] BF16");
  require_device_pointer(fn, "kv", in.kv, "[num_pages, page_size, h_kv, d_qk] BF16");
  require_device_pointer(fn, "block_table", in.block_table, "[batch, max_pages_per_seq] int32");
  require_device_pointer(fn, "seqlens", in.seqlens, "[batch] int32");
}

/// Throws amla::invalid_argument naming options.plan when `what` of the plan (`planned`) is not
/// this call's (`here`).
inline void require_plan_match(const char* fn, const char* what, int planned, int here) {
  if (planned != here) {
    amla::detail::throw_invalid(fn, "options.plan",
                                std::string("a plan of ") + what + " " + std::to_string(planned),
                                std::string("must be sized for this call's ") + what + " " +
                                    std::to_string(here) + " (plan_decode with the same shape)");
  }
}

/// The reused plan's checks that need no device: it is of this call's shape and the sized
/// schedule's.
inline void validate_plan_shape(const char* fn, const DecodeShape& s,
                                const CudaDecodeOptions& opt) {
  const DecodePlan& plan = *opt.plan;
  if (opt.num_splits != 0) {
    amla::detail::throw_invalid(fn, "options.plan", "a sized plan",
                                "needs options.num_splits = 0 (got " +
                                    std::to_string(opt.num_splits) +
                                    "): a plan is the sized schedule's");
  }
  if (plan.memory == nullptr) {
    amla::detail::throw_invalid(fn, "options.plan", "a plan with memory nullptr",
                                "must be made by plan_decode (its memory holds the schedule)");
  }
  require_plan_match(fn, "batch", plan.batch, s.batch);
  require_plan_match(fn, "s_q", plan.s_q, s.s_q);
  require_plan_match(fn, "h_q", plan.h_q, s.h_q);
  require_plan_match(fn, "block_keys", plan.block_keys, hopper::block_keys);
}

/// Host-only validation (no CUDA call): throws amla::invalid_argument. Returns the softmax scale.
inline float validate_host(const DeviceDecodeInputs& in, const DeviceDecodeOutputs& out,
                           const CudaDecodeOptions& opt) {
  const DecodeShape& s = in.shape;
  const char* fn = "amla::cuda::decode";
  validate_inputs(fn, in);
  require_device_pointer(fn, "out", out.out, "[batch, s_q, h_q, d_v] BF16");
  require_device_pointer(fn, "lse", out.lse, "[batch, h_q, s_q] float");
  DecodeOptions problem;
  problem.causal = opt.causal;
  problem.softmax_scale = opt.softmax_scale;
  const float scale = validate_options(fn, problem, s);
  auto require = [&](bool ok, const char* name, const auto& value, const char* rule) {
    if (!ok) amla::detail::throw_invalid(fn, name, amla::detail::to_text(value), rule);
  };
  require(opt.mode == rescale_mode::standard || opt.mode == rescale_mode::amla, "options.mode",
          static_cast<int>(opt.mode), "must be standard or amla");
  require(opt.kernel == kernel_kind::automatic || opt.kernel == kernel_kind::simple ||
              opt.kernel == kernel_kind::hopper,
          "options.kernel", static_cast<int>(opt.kernel), "must be automatic, simple or hopper");
  require(opt.kv_l2_hint == l2_hint::automatic || opt.kv_l2_hint == l2_hint::none ||
              opt.kv_l2_hint == l2_hint::evict_first || opt.kv_l2_hint == l2_hint::evict_last,
          "options.kv_l2_hint", static_cast<int>(opt.kv_l2_hint),
          "must be automatic, none, evict_first or evict_last");
  require(opt.num_splits >= 0 && opt.num_splits <= max_splits, "options.num_splits", opt.num_splits,
          "must lie in [0, 64] (0 = sized from the batch and lengths)");
  require(opt.rescale == pow2_mode::hardware || opt.rescale == pow2_mode::safe, "options.rescale",
          static_cast<int>(opt.rescale),
          "must be pow2_mode::hardware or safe (checked needs the CPU recurrence's report)");
  if (opt.workspace != nullptr) {
    require(reinterpret_cast<std::uintptr_t>(opt.workspace) % 256 == 0, "options.workspace",
            reinterpret_cast<std::uintptr_t>(opt.workspace), "must be 256-byte aligned");
  }
  if (opt.phase_times != nullptr) {
    require(hopper::phase_times_built, "options.phase_times",
            reinterpret_cast<std::uintptr_t>(opt.phase_times),
            "must be nullptr unless the program is built with AMLA_CUDA_PHASE_TIMES=1");
    require(opt.kernel == kernel_kind::hopper, "options.phase_times",
            reinterpret_cast<std::uintptr_t>(opt.phase_times),
            "needs options.kernel = hopper (only the Hopper kernel records its phases)");
  }
  if (opt.plan != nullptr) validate_plan_shape(fn, s, opt);
  if (opt.kernel == kernel_kind::hopper) {
    const std::string why = hopper_unsupported(in, out);
    if (!why.empty()) {
      amla::detail::throw_invalid(fn, "options.kernel", "hopper",
                                  "the Hopper kernel " + why + "; use automatic or simple");
    }
  }
  return scale;
}

/// Copies seqlens and block_table to the host and checks them with amla::validate_tables (the
/// CPU recurrences' check).
inline std::vector<std::int32_t> validate_tables_on_host(const char* fn,
                                                         const DeviceDecodeInputs& in,
                                                         cudaStream_t stream) {
  const DecodeShape& s = in.shape;
  std::vector<std::int32_t> lens(s.seqlens_elems());
  std::vector<std::int32_t> table(s.block_table_elems());
  AMLA_CUDA_CHECK(cudaMemcpyAsync(lens.data(), in.seqlens, lens.size() * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(table.data(), in.block_table, table.size() * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  validate_tables(fn, s, table, lens);
  return lens;
}

/// cuTensorMapEncodeTiled through the runtime's driver entry point (no -lcuda needed).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    AMLA_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                     cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || p == nullptr) {
      throw cuda_error("cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled) found no symbol",
                       static_cast<int>(q));
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

/// A 2D BF16 tensor map with 128-byte swizzle: `rows` rows of `cols` elements, `row_bytes`
/// apart; boxes of box_cols x box_rows.
inline CUtensorMap make_tensor_map(const void* base, std::uint64_t cols, std::uint64_t rows,
                                   std::uint64_t row_bytes, std::uint32_t box_cols,
                                   std::uint32_t box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
      elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw cuda_error("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(r) +
                         " (cols " + std::to_string(cols) + ", rows " + std::to_string(rows) +
                         ", row_bytes " + std::to_string(row_bytes) + ")",
                     static_cast<int>(r));
  }
  return map;
}

struct device_facts {
  int ordinal = 0;
  int sms = 0;
  int major = 0;
  int minor = 0;
};

inline device_facts current_device() {
  int dev = 0;
  AMLA_CUDA_CHECK(cudaGetDevice(&dev));
  device_facts f;
  f.ordinal = dev;
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, dev));
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&f.major, cudaDevAttrComputeCapabilityMajor, dev));
  AMLA_CUDA_CHECK(cudaDeviceGetAttribute(&f.minor, cudaDevAttrComputeCapabilityMinor, dev));
  return f;
}

/// The schedule bounds of a shape on a GPU of `sms` SMs (the Hopper kernel's row blocks).
inline SplitScheduleBounds split_bounds(const DecodeShape& s, const CudaDecodeOptions& opt,
                                        int sms) {
  const int row_blocks = (s.rows_per_group() + hopper::rows_per_cta - 1) / hopper::rows_per_cta;
  SplitScheduleOptions so;
  so.sms = sms;
  so.block_keys = hopper::block_keys;
  so.num_splits = opt.num_splits;
  return split_schedule_bounds(s.batch, row_blocks, so);
}

/// Where the sized plan's lists of split_plan::piece_entry start in the plan region: after the
/// header's 256 bytes and three arrays of batch + 1 entries (plan_arrays), 16-byte aligned. The
/// split requests' first pieces (batch + 1 entries) come first, then the piece list (one wave's
/// slots of entries).
inline std::size_t plan_entries_offset(int batch) {
  const std::size_t batch1 = static_cast<std::size_t>(batch) + 1;
  return (256 + 3 * batch1 * sizeof(std::int32_t) + 15) / 16 * 16;
}

/// The Hopper path's workspace: the sized plan (header, piece and slot prefixes, the order, the
/// split requests' first pieces, the piece list; plan_bytes, a multiple of 256), then the partial
/// outputs and lse of every slot the schedule may write.
struct workspace_layout {
  std::size_t plan_bytes = 0;
  std::size_t bytes = 0;
};

inline workspace_layout workspace_layout_of(const DecodeShape& s, const CudaDecodeOptions& opt,
                                            int sms) {
  const int rows = s.rows_per_group();
  const SplitScheduleBounds bounds = split_bounds(s, opt, sms);
  workspace_layout w;
  if (opt.num_splits == 0) {
    const std::size_t entries = static_cast<std::size_t>(s.batch) + 1 + bounds.slots;
    const std::size_t plan =
        plan_entries_offset(s.batch) + entries * sizeof(split_plan::piece_entry);
    w.plan_bytes = (plan + 255) / 256 * 256;
  }
  const std::size_t part_rows = static_cast<std::size_t>(bounds.partials) * rows;
  w.bytes = w.plan_bytes + part_rows * (hopper::d_v + 1) * sizeof(float);
  return w;
}

/// The sized plan's place at the start of the Hopper path's workspace: the header, then from byte
/// 256 piece_prefix, slot_prefix and order, batch + 1 entries each, then
/// (plan_entries_offset) split_pieces, batch + 1 entries, and the piece list, one wave's slots of
/// entries. order (written by plan_decode for a batch that fills a wave: split_plan::order_kernel)
/// lists the requests longest first; split_pieces the split requests' first pieces, which the
/// combine reads; the piece list (written by plan_decode) the pieces of a schedule that cuts a
/// request, which the decode kernel's CTAs read where the plan is reused.
struct plan_arrays {
  split_plan::header* header;
  std::int32_t* piece_prefix;
  std::int32_t* slot_prefix;
  std::int32_t* order;
  split_plan::piece_entry* split_pieces;
  split_plan::piece_entry* pieces;
};

inline plan_arrays plan_arrays_in(void* workspace, int batch) {
  auto* base = static_cast<std::uint8_t*>(workspace);
  const std::size_t batch1 = static_cast<std::size_t>(batch) + 1;
  plan_arrays a;
  a.header = reinterpret_cast<split_plan::header*>(base);
  a.piece_prefix = reinterpret_cast<std::int32_t*>(base + 256);
  a.slot_prefix = a.piece_prefix + batch1;
  a.order = a.slot_prefix + batch1;
  a.split_pieces = reinterpret_cast<split_plan::piece_entry*>(base + plan_entries_offset(batch));
  a.pieces = a.split_pieces + batch1;
  return a;
}

/// The plan_out that writes a plan into the arrays `a` for one wave of `slots` pieces, with the
/// piece list or (pieces false) without.
inline split_plan::plan_out plan_out_of(const plan_arrays& a, int slots, bool pieces) {
  return {.head = a.header,
          .piece_prefix = a.piece_prefix,
          .slot_prefix = a.slot_prefix,
          .split_pieces = a.split_pieces,
          .pieces = pieces ? a.pieces : nullptr,
          .entries = slots};
}

/// A reused plan against the current lengths (host copies, `lens`): each request must need the
/// number of pieces the plan gave it (the kernel's own check traps; this one, done where the
/// tables are checked on the host anyway, throws amla::invalid_argument naming options.plan).
inline void validate_plan_lengths(const char* fn, const DecodePlan& plan,
                                  std::span<const std::int32_t> lens, cudaStream_t stream) {
  const plan_arrays a = plan_arrays_in(const_cast<void*>(plan.memory), plan.batch);
  split_plan::header h{};
  std::vector<std::int32_t> prefix(static_cast<std::size_t>(plan.batch) + 1);
  AMLA_CUDA_CHECK(
      cudaMemcpyAsync(&h, a.header, sizeof(split_plan::header), cudaMemcpyDeviceToHost, stream));
  AMLA_CUDA_CHECK(cudaMemcpyAsync(prefix.data(), a.piece_prefix,
                                  prefix.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost,
                                  stream));
  AMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (std::size_t b = 0; b < lens.size(); ++b) {
    const int planned = prefix[b + 1] - prefix[b];
    const int now = split_schedule::pieces_for(split_schedule::blocks_of(lens[b], plan.block_keys),
                                               h.piece_blocks);
    if (planned != now) {
      amla::detail::throw_invalid(
          fn, "options.plan",
          "a plan giving request " + std::to_string(b) + " " + std::to_string(planned) + " pieces",
          "must give each request the pieces its current length needs (seqlens[" +
              std::to_string(b) + "] = " + std::to_string(lens[b]) + " needs " +
              std::to_string(now) + " of at most " + std::to_string(h.piece_blocks) +
              " blocks each); plan_decode again after the lengths change");
    }
  }
}

/// The split schedule's view of `in`: its batch and device seqlens over the Hopper kernel's KV
/// blocks, with `num_splits` (0: sized).
inline SplitScheduleView schedule_view(const DeviceDecodeInputs& in, int num_splits) {
  SplitScheduleView v;
  v.batch = in.shape.batch;
  v.num_splits = num_splits;
  v.block_keys = hopper::block_keys;
  v.seqlens = in.seqlens;
  return v;
}

/// Launches `kernel` on `stream`, with programmatic dependent launch when `pdl` (the kernel
/// waits for the one before it with griddep_wait before it reads anything).
template <class... Params, class... Args>
void launch_ex(void (*kernel)(Params...), dim3 grid, int block, std::size_t smem, bool pdl,
               cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(block));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  AMLA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

/// Launches the plan kernel (one warp) that writes v's sized schedule for one wave of `slots`
/// pieces into the plan arrays `a`, its piece list included.
inline void launch_plan_kernel(const SplitScheduleView& v, int slots, const plan_arrays& a,
                               cudaStream_t stream) {
  launch_ex(split_plan::plan_kernel<>, dim3(1), 32, 0, false, stream, v, slots,
            plan_out_of(a, slots, true));
}

template <rescale_mode Mode>
void launch_simple(const DeviceDecodeInputs& in, const DeviceDecodeOutputs& out, float scale,
                   const CudaDecodeOptions& opt, cudaStream_t stream) {
  const DecodeShape& s = in.shape;
  const simple::params p{
      .shape = s,
      .causal = opt.causal,
      .rescale = opt.rescale,
      .skip_unmoved = opt.skip_unmoved,
      .scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.4426950408889634),
      .in = dense_reads_of(in),
      .out = reinterpret_cast<__nv_bfloat16*>(out.out),
      .lse = out.lse};
  const std::size_t smem = simple::smem_bytes(s.d_qk, s.d_v);
  if (smem > 48 * 1024) {
    AMLA_CUDA_CHECK(cudaFuncSetAttribute(simple::decode_kernel<Mode>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
  }
  const dim3 grid(static_cast<unsigned>(s.h_q), static_cast<unsigned>(s.s_q),
                  static_cast<unsigned>(s.batch));
  simple::decode_kernel<Mode><<<grid, simple::threads, smem, stream>>>(p);
  AMLA_CUDA_CHECK_LAUNCH("amla::cuda::detail::simple::decode_kernel");
}

template <rescale_mode Mode>
DecodeLaunch launch_hopper(const DeviceDecodeInputs& in, const DeviceDecodeOutputs& out,
                           float scale, const CudaDecodeOptions& opt, const device_facts& dev,
                           cudaStream_t stream) {
  const DecodeShape& s = in.shape;
  hopper::params p{};
  p.shape = s;
  p.rows = s.rows_per_group();
  p.row_blocks = (p.rows + hopper::rows_per_cta - 1) / hopper::rows_per_cta;
  p.causal = opt.causal;
  p.kv_l2_hint = detail::l2_policy_of(opt.kv_l2_hint);
  p.stagger_qk = opt.stagger_qk ? 1 : 0;
  p.skip_unmoved = opt.skip_unmoved ? 1 : 0;
  p.scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.4426950408889634);
  p.block_table = in.block_table;
  p.seqlens = in.seqlens;
  p.out = reinterpret_cast<__nv_bfloat16*>(out.out);
  p.lse = out.lse;
  p.phase_times = opt.phase_times;

  const SplitScheduleBounds bounds = split_bounds(s, opt, dev.sms);
  const bool sized = opt.num_splits == 0;
  p.schedule = schedule_view(in, opt.num_splits);
  SplitScheduleView& v = p.schedule;
  // A split request has two pieces or more.
  const int split_requests = sized ? std::min(s.batch, bounds.partials / 2) : s.batch;

  // One workspace: the plan (sized), then the partial outputs (when some request is cut).
  const workspace_layout w = workspace_layout_of(s, opt, dev.sms);
  const std::size_t part_rows = static_cast<std::size_t>(bounds.partials) * p.rows;
  std::uint8_t* workspace = static_cast<std::uint8_t*>(opt.workspace);
  if (workspace != nullptr && opt.workspace_bytes < w.bytes) {
    amla::detail::throw_invalid(
        "amla::cuda::decode", "options.workspace_bytes", std::to_string(opt.workspace_bytes),
        "must be at least decode_workspace_bytes() = " + std::to_string(w.bytes) +
            " for this shape and schedule");
  }
  const bool own_workspace = workspace == nullptr && w.bytes > 0;
  if (own_workspace) AMLA_CUDA_CHECK(cudaMallocAsync(&workspace, w.bytes, stream));
  const split_plan::piece_entry* split_pieces = nullptr;
  if (sized) {
    // A plan made once by plan_decode is read, not computed (the CTAs check its piece counts
    // against the current lengths); otherwise this call writes one into its workspace.
    const bool reused = opt.plan != nullptr;
    const plan_arrays a =
        plan_arrays_in(reused ? const_cast<void*>(opt.plan->memory) : workspace, s.batch);
    split_pieces = a.split_pieces;
    p.plan = a.header;
    v.piece_prefix = a.piece_prefix;
    v.slot_prefix = a.slot_prefix;
    if (reused) {
      p.plan_reused = 1;
      // A batch that fills a wave: plan_decode listed its requests longest first, and the CTAs
      // take them in that order. One the schedule may cut: each CTA reads its piece from the
      // plan's piece list (one load, where piece_at searches piece_prefix).
      if (bounds.partials == 0) p.order = a.order;
      if (bounds.partials > 0) p.piece_list = a.pieces;
    } else if (bounds.partials > 0) {
      // A batch the schedule may cut (smaller than a wave): the decode kernel's CTAs size the
      // schedule themselves rather than wait for a plan kernel (every warp one search and one
      // scan of the batch), and CTA (0, 0) writes the plan the combine reads.
      p.fused_plan_slots = bounds.slots;
      p.plan_written = plan_out_of(a, bounds.slots, false);
    }
    // A batch that fills a wave is not cut (whole_requests below): its CTAs read no plan and no
    // combine runs, so none is made and the launch is one fixed split's, which ran 1.9% (H100)
    // and 2.9% (H200) faster than the sized one behind a plan kernel at b 128, s_q 1, h_q 128,
    // s_k 1024 (bench/CUDA_RESULTS.md, row 99).
  }
  // No request is cut: one fixed split, or a sized schedule of a batch that fills a wave.
  p.whole_requests = opt.num_splits == 1 || (sized && bounds.partials == 0) ? 1 : 0;
  if (part_rows > 0) {
    p.out_part = reinterpret_cast<float*>(workspace + w.plan_bytes);
    p.lse_part = p.out_part + part_rows * hopper::d_v;
  }

  const CUtensorMap tm_q =
      make_tensor_map(in.q, hopper::d_qk, static_cast<std::uint64_t>(s.batch) * p.rows,
                      hopper::d_qk * sizeof(bf16), 64, 64);
  const CUtensorMap tm_kv =
      make_tensor_map(in.kv, hopper::d_qk, static_cast<std::uint64_t>(s.num_pages) * s.page_size,
                      hopper::d_qk * sizeof(bf16), 64,
                      static_cast<std::uint32_t>(std::min(s.page_size, hopper::block_keys)));
  // AMLA's safe add is its own instantiation: its rare fix-up path must not cost the others
  // registers.
  using kernel_t = void (*)(CUtensorMap, CUtensorMap, hopper::params);
  // The kernel that sizes the schedule itself is another instantiation too: its code at the start
  // of a CTA costs the others registers and time (measured in bench/CUDA_RESULTS.md).
  const bool size_here = p.fused_plan_slots > 0;
  kernel_t kernel = size_here ? hopper::decode_kernel<Mode, false, true>
                              : hopper::decode_kernel<Mode, false, false>;
  if constexpr (Mode == rescale_mode::amla) {
    if (opt.rescale == pow2_mode::safe) {
      kernel = size_here ? hopper::decode_kernel<Mode, true, true>
                         : hopper::decode_kernel<Mode, true, false>;
    }
  }
  AMLA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(hopper::smem_bytes)));
  launch_ex(kernel, dim3(static_cast<unsigned>(p.row_blocks), static_cast<unsigned>(bounds.pieces)),
            hopper::threads, hopper::smem_bytes, opt.pdl, stream, tm_q, tm_kv, p);
  if (bounds.partials > 0) {
    combine::params c{};
    c.shape = s;
    c.rows = p.rows;
    c.schedule = v;
    c.split_pieces = split_pieces;
    c.out_part = p.out_part;
    c.lse_part = p.lse_part;
    c.out = p.out;
    c.lse = p.lse;
    if (opt.phase_times != nullptr) {
      // The combine's words follow the decode kernel's per-CTA records.
      c.phase_times = opt.phase_times +
                      static_cast<std::size_t>(p.row_blocks) * bounds.pieces * hopper::phase_slots;
    }
    static_assert(combine::d_v == hopper::d_v, "the combine reads the Hopper kernel's partials");
    // A split request's slots: num_splits, or about a wave's pieces over the batch when sized
    // (the lengths, on the device, decide; any count is merged right, this picks the layout).
    const int slots_per_request = sized ? bounds.slots / s.batch : opt.num_splits;
    const bool few = slots_per_request <= combine::few_slots;
    const int parts_per_row = few ? combine::parts_for_few_slots : combine::parts_for_many_slots;
    const int parts = p.rows * parts_per_row;
    launch_ex(few ? combine::combine_kernel<combine::parts_for_few_slots>
                  : combine::combine_kernel<combine::parts_for_many_slots>,
              dim3(static_cast<unsigned>((parts + combine::warps - 1) / combine::warps),
                   static_cast<unsigned>(split_requests)),
              combine::threads, 0, opt.pdl, stream, c);
  }
  if (own_workspace) AMLA_CUDA_CHECK(cudaFreeAsync(workspace, stream));
  DecodeLaunch launch;
  launch.kernel = kernel_kind::hopper;
  launch.num_splits = opt.num_splits;
  launch.pieces = bounds.pieces;
  return launch;
}

/// Whether the code loaded for the current device holds the Hopper kernel's real body, i.e. this
/// program was built for sm_90a and runs on a compute capability 9.0 device (elsewhere the body
/// is a trap, detail/ptx.cuh). Asked once per device with a one-thread probe kernel.
inline bool hopper_kernel_built(int device) {
  static std::mutex mutex;
  static std::vector<int> known;  // per device: -1 not asked yet, 0 no, 1 yes
  const std::lock_guard<std::mutex> lock(mutex);
  if (device >= static_cast<int>(known.size()))
    known.resize(static_cast<std::size_t>(device) + 1, -1);
  int& k = known[static_cast<std::size_t>(device)];
  if (k < 0) {
    int* flag = nullptr;
    AMLA_CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
    hopper::sm90a_probe<><<<1, 1>>>(flag);
    const cudaError_t launched = cudaGetLastError();
    int host = 0;
    const cudaError_t copied = launched == cudaSuccess
                                   ? cudaMemcpy(&host, flag, sizeof(int), cudaMemcpyDeviceToHost)
                                   : launched;
    cudaFree(flag);
    if (copied != cudaSuccess) throw_cuda("hopper::sm90a_probe", copied, __FILE__, __LINE__);
    k = host == 1 ? 1 : 0;
  }
  return k == 1;
}

template <rescale_mode Mode>
DecodeLaunch dispatch(const DeviceDecodeInputs& in, const DeviceDecodeOutputs& out, float scale,
                      const CudaDecodeOptions& opt, const device_facts& dev, cudaStream_t stream) {
  DecodeLaunch launch;
  std::string why = hopper_unsupported(in, out);
  if (why.empty() && !(dev.major == 9 && dev.minor == 0)) {
    why = "needs compute capability 9.0 (this device is " + std::to_string(dev.major) + "." +
          std::to_string(dev.minor) + ")";
  } else if (why.empty() && !hopper_kernel_built(dev.ordinal)) {
    why = "needs a build for sm_90a (wgmma, TMA): add 90a to AMLA_CUDA_ARCHITECTURES";
  }
  if (!why.empty() && opt.kernel == kernel_kind::hopper) {
    amla::detail::throw_invalid("amla::cuda::decode", "options.kernel", "hopper",
                                "the Hopper kernel " + why);
  }
  const bool hopper_ok = why.empty() && opt.kernel != kernel_kind::simple;
  if (hopper_ok) {
    launch = launch_hopper<Mode>(in, out, scale, opt, dev, stream);
  } else {
    launch.kernel = kernel_kind::simple;
    launch.num_splits = 1;
    if (opt.kernel == kernel_kind::automatic) launch.fallback_reason = "the Hopper kernel " + why;
    launch_simple<Mode>(in, out, scale, opt, stream);
  }
  return launch;
}

}  // namespace detail

/// Computes out and lse of a decode problem on `stream` (see the file comment). Validates on the
/// host first (amla::invalid_argument), then launches; CUDA errors throw amla::cuda::cuda_error.
/// Asynchronous unless options.check_tables.
inline DecodeLaunch decode(const DeviceDecodeInputs& in, const DeviceDecodeOutputs& out,
                           const CudaDecodeOptions& options = {}, cudaStream_t stream = nullptr) {
  const float scale = detail::validate_host(in, out, options);
  const detail::device_facts dev = detail::current_device();
  if (options.plan != nullptr) {
    // Before anything is read from the plan's memory (a plan of another device's slots may lie in
    // memory of that device).
    detail::require_plan_match("amla::cuda::decode", "slots", options.plan->slots,
                               detail::split_bounds(in.shape, options, dev.sms).slots);
  }
  if (options.check_tables) {
    const std::vector<std::int32_t> lens =
        detail::validate_tables_on_host("amla::cuda::decode", in, stream);
    if (options.plan != nullptr) {
      detail::validate_plan_lengths("amla::cuda::decode", *options.plan, lens, stream);
    }
  }
  if (options.mode == rescale_mode::amla) {
    return detail::dispatch<rescale_mode::amla>(in, out, scale, options, dev, stream);
  }
  return detail::dispatch<rescale_mode::standard>(in, out, scale, options, dev, stream);
}

/// Sizes the split-KV schedule of `in` (its batch and device seqlens) once, as decode() with
/// num_splits 0 would in each call, and writes it on `stream` into the plan region at the start of
/// options.workspace (required: at least decode_workspace_bytes(), 256-byte aligned). For a batch
/// that fills a wave of CTAs (which the schedule does not cut) the plan also lists the requests
/// longest first (detail/split_plan.cuh, order_kernel; up to longest_first_max_batch requests), and
/// a decode() with the plan gives them to its CTAs in that order, so that a mixed batch's last
/// CTAs run its shortest requests: 9-10% off mixed batches of 512 and 256 requests on an H200
/// (bench/CUDA_RESULTS.md); the ordering's batch^2 comparisons make plan_decode take 10 us at
/// b 128, 20 at 512, 111 at 4096 and 2.2 ms at 65536 there (bm_cuda_decode --plan). Returns the
/// handle to put in CudaDecodeOptions::plan for later decode() calls of this shape on this device
/// (e.g. every layer of one decode step): they launch no plan kernel. The plan stays valid while
/// the workspace's plan region is not overwritten (a decode() with this plan leaves it alone, as
/// does one without a plan of a batch that fills a wave; any other decode() without a plan, and
/// another plan_decode, rewrite it) and each request's length needs the same
/// number of pieces; a decode() whose lengths need others is refused on the host when it checks
/// its tables (check_tables), and otherwise traps on the device (the stream then reports an
/// illegal instruction and the context is lost). With options.check_tables the tables are
/// validated on the host first (synchronises the stream).
inline DecodePlan plan_decode(const DeviceDecodeInputs& in, const CudaDecodeOptions& options = {},
                              cudaStream_t stream = nullptr) {
  const char* fn = "amla::cuda::plan_decode";
  detail::validate_inputs(fn, in);
  const DecodeShape& s = in.shape;
  if (options.num_splits != 0) {
    amla::detail::throw_invalid(fn, "options.num_splits", std::to_string(options.num_splits),
                                "must be 0: a plan is the sized schedule's");
  }
  if (options.workspace == nullptr ||
      reinterpret_cast<std::uintptr_t>(options.workspace) % 256 != 0) {
    amla::detail::throw_invalid(
        fn, "options.workspace",
        amla::detail::to_text(reinterpret_cast<std::uintptr_t>(options.workspace)),
        "must be device memory, 256-byte aligned, that holds the plan");
  }
  const detail::device_facts dev = detail::current_device();
  const detail::workspace_layout w = detail::workspace_layout_of(s, options, dev.sms);
  if (options.workspace_bytes < w.bytes) {
    amla::detail::throw_invalid(
        fn, "options.workspace_bytes", std::to_string(options.workspace_bytes),
        "must be at least decode_workspace_bytes() = " + std::to_string(w.bytes) +
            " for this shape");
  }
  if (options.check_tables) detail::validate_tables_on_host(fn, in, stream);
  const SplitScheduleBounds bounds = detail::split_bounds(s, options, dev.sms);
  const detail::plan_arrays a = detail::plan_arrays_in(options.workspace, s.batch);
  const SplitScheduleView v = detail::schedule_view(in, 0);
  detail::launch_plan_kernel(v, bounds.slots, a, stream);
  if (bounds.partials == 0) {
    // A batch that fills a wave is not cut: its requests are listed longest first instead, so
    // that the decode kernel's last CTAs take short ones.
    const unsigned ctas = static_cast<unsigned>((s.batch + detail::split_plan::order_threads - 1) /
                                                detail::split_plan::order_threads);
    detail::split_plan::order_kernel<>
        <<<ctas, detail::split_plan::order_threads, 0, stream>>>(v, a.order);
    AMLA_CUDA_CHECK_LAUNCH("amla::cuda::detail::split_plan::order_kernel");
  }
  DecodePlan plan;
  plan.batch = s.batch;
  plan.s_q = s.s_q;
  plan.h_q = s.h_q;
  plan.block_keys = detail::hopper::block_keys;
  plan.slots = bounds.slots;
  plan.memory = options.workspace;
  return plan;
}

/// Bytes of CudaDecodeOptions::workspace that decode() needs for this shape and options on the
/// current device (the Hopper kernel's split-KV plan and partial outputs; 0 when it needs none).
/// An upper bound for any seqlens: it depends on the batch, not on the lengths.
inline std::size_t decode_workspace_bytes(const DecodeShape& shape,
                                          const CudaDecodeOptions& options = {}) {
  validate_shape("amla::cuda::decode_workspace_bytes", shape, true);
  return detail::workspace_layout_of(shape, options, detail::current_device().sms).bytes;
}

}  // namespace amla::cuda
