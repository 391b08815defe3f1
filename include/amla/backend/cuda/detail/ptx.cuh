// amla/backend/cuda/detail/ptx.cuh: thin wrappers over the Hopper PTX the fast kernel uses:
// mbarriers, the bulk tensor copy (TMA) and bulk stores, named barriers, proxy fences, and wgmma
// with shared memory matrix descriptors. Nothing here knows about attention.
//
// Architecture gating, as CuTe does it (CUTE_ARCH_MMA_SM90A_ENABLED): every wrapper is declared
// and compiles for every architecture; only its Hopper body is under AMLA_CUDA_SM90A_ENABLED,
// which is defined in a device compilation for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL). wgmma exists
// only in that arch-specific target; the TMA, mbarrier transaction and proxy-fence instructions
// need sm_90 and serve only the Hopper kernel, so the one gate covers them all. Elsewhere the
// body is AMLA_CUDA_ARCH_UNSUPPORTED: a message naming the instruction, then __trap(), so a
// misuse fails loudly at run time instead of silently doing nothing. Code that must not even try
// (the Hopper kernel's body) tests AMLA_CUDA_SM90A_ENABLED itself, and the host asks whether the
// loaded code has it (driver.cuh, hopper_kernel_built) before choosing that kernel.
// Named barriers, the shared-memory address conversion and the register fences are plain
// sm_70+ PTX and are not gated.
#pragma once

#include "amla/backend/cuda/detail/check.cuh"

#include <cuda.h>

#include <cstdint>
#include <cstdio>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define AMLA_CUDA_SM90A_ENABLED 1
#endif

#if defined(__CUDA_ARCH__)
/// Device code reached on an architecture that lacks the instruction `what`: says so, and traps.
#define AMLA_CUDA_ARCH_UNSUPPORTED(what)                                                  \
  do {                                                                                    \
    printf("%s:%d: amla: %s needs sm_90a (this code was compiled for sm_%d)\n", __FILE__, \
           __LINE__, what, __CUDA_ARCH__ / 10);                                           \
    __trap();                                                                             \
  } while (0)
#else
#define AMLA_CUDA_ARCH_UNSUPPORTED(what) \
  do {                                   \
  } while (0)
#endif

namespace amla::cuda::detail::ptx {

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers (shared::cta, 64-bit) ----------------------------------------------------------

__device__ __forceinline__ void mbar_init(std::uint64_t* bar, std::uint32_t count) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count)
               : "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("mbarrier.init");
#endif
}
/// Makes mbarrier initialisation visible to the async proxy (the TMA unit).
__device__ __forceinline__ void fence_mbar_init() {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("fence.mbarrier_init");
#endif
}
/// One arrival that also announces `bytes` of transactions the TMA will complete.
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("mbarrier.arrive.expect_tx");
#endif
}
/// Blocks until the phase with the given parity has completed. The retry loop lives inside the
/// asm block: a C++ loop here would put a branch between wgmma instructions in flight, and ptxas
/// then serialises them (warning C7520).
__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, std::uint32_t parity) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile(
      "{\n.reg .pred p;\n"
      "AMLA_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra AMLA_MBAR_WAIT;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("mbarrier.try_wait");
#endif
}

// ---- bulk tensor copy (TMA), global -> shared, completing on an mbarrier ------------------------

/// Copies the box at coordinates (c0 = innermost, c1) of `map` to `dst` (shared memory).
/// Out-of-bounds elements are filled with zeros and still count towards the transaction bytes.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1,
                                            std::uint64_t* bar) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("cp.async.bulk.tensor (TMA)");
#endif
}
/// The same copy with an L2 cache policy (from make_l2_policy) for the data it brings in.
__device__ __forceinline__ void tma_load_2d_hint(void* dst, const CUtensorMap* map, int c0, int c1,
                                                 std::uint64_t* bar, std::uint64_t policy) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "l"(policy)
      : "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("cp.async.bulk.tensor (TMA)");
#endif
}
/// Copies `bytes` (a multiple of 16) from shared memory at `src` to global memory at `dst` (both
/// 16-byte aligned) in the background, as part of this thread's current bulk group
/// (bulk_commit); the thread goes on at once.
__device__ __forceinline__ void bulk_store(void* dst, const void* src, std::uint32_t bytes) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
               "r"(smem_u32(src)), "r"(bytes)
               : "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("cp.async.bulk (bulk store)");
#endif
}
/// Closes this thread's bulk group of the bulk_store calls since the last commit.
__device__ __forceinline__ void bulk_commit() {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("cp.async.bulk.commit_group");
#endif
}
/// Waits until this thread's committed bulk groups have read their shared-memory sources (their
/// writes may still be in flight: the grid's end makes them visible to the next kernel).
__device__ __forceinline__ void bulk_wait_read_all() {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("cp.async.bulk.wait_group.read");
#endif
}
/// An L2 cache policy: 1 = evict first, 2 = evict last (anything else: evict normal).
__device__ __forceinline__ std::uint64_t make_l2_policy(int kind) {
  std::uint64_t policy;
  if (kind == 1) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  } else if (kind == 2) {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  } else {
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  }
  return policy;
}
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("prefetch.tensormap");
#endif
}

// ---- named barriers and fences ------------------------------------------------------------------

/// Waits at barrier `id` until `count` threads (a multiple of 32) have arrived or synced.
__device__ __forceinline__ void bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
/// Arrives at barrier `id` without waiting (a producer's half of a producer/consumer pair).
__device__ __forceinline__ void bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}
/// Orders this thread's earlier generic-proxy shared memory writes before later async-proxy
/// accesses (wgmma operand reads, TMA writes) of any thread that synchronises with it.
__device__ __forceinline__ void fence_proxy_async_smem() {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("fence.proxy.async");
#endif
}

/// Starts fetching the line holding `p` into L1 (and L2) without waiting for it: a later load of
/// it finds it there or in flight. Plain sm_70+ PTX.
__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

// ---- timers (any architecture) ------------------------------------------------------------------
// %globaltimer: nanoseconds on a clock every SM shares (its updates may be coarser than a
// nanosecond); %smid: the SM running the thread. A timing build of the Hopper kernel and the
// combine reads them (hopper_kernel.cuh and combine.cuh describe their probes).

// AMLA_CUDA_PHASE_TIMES=1 builds the timing probes into the Hopper kernel and the split-KV combine
// (CudaDecodeOptions::phase_times, summarised by bm_cuda_decode --phases). A build for timing
// only: the probes' stores and fences cost a little time and change nothing else. 0 (the
// default) compiles them away; the code stays parsed and type-checked either way.
#ifndef AMLA_CUDA_PHASE_TIMES
#define AMLA_CUDA_PHASE_TIMES 0
#endif

__device__ __forceinline__ std::uint64_t globaltimer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ std::uint32_t smid() {
  std::uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// ---- programmatic dependent launch (sm_90) ------------------------------------------------------
// A kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while the
// kernel before it on the stream is still running; griddep_wait blocks until that kernel has
// completed and its writes are visible (a no-op when there is no such dependency), and
// griddep_launch_dependents lets the next kernel start once every CTA of this one has called it
// or exited. Before sm_90 there is no such launch: both are no-ops.

__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- wgmma --------------------------------------------------------------------------------------

/// A shared memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address,
/// leading and stride byte offsets (all in 16-byte units, 14 bits each), swizzle mode in bits
/// 62-63 (1 = 128-byte swizzle). Base offset 0: every tile starts 1024-byte aligned.
/// For a K-major operand with 128-byte swizzle (rows of 64 BF16 = 128 bytes, 8-row atoms of 1024
/// bytes) the stride offset is the distance between 8-row groups and the leading offset is unused;
/// for an MN-major one (the transposed B of P*V) the leading offset is the distance between
/// 64-element column atoms and the stride offset the distance between 8-row groups along K.
__device__ __forceinline__ std::uint64_t smem_desc_sw128(std::uint32_t smem_addr,
                                                         std::uint32_t lead_bytes,
                                                         std::uint32_t stride_bytes) {
  std::uint64_t d = 0;
  d |= static_cast<std::uint64_t>((smem_addr >> 4) & 0x3FFFu);
  d |= static_cast<std::uint64_t>((lead_bytes >> 4) & 0x3FFFu) << 16;
  d |= static_cast<std::uint64_t>((stride_bytes >> 4) & 0x3FFFu) << 32;
  d |= static_cast<std::uint64_t>(1) << 62;
  return d;
}

__device__ __forceinline__ void wgmma_fence() {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("wgmma.fence");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("wgmma.commit_group");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("wgmma.wait_group");
#endif
}
/// Pins registers to this point of the program: the compiler may neither move their reads and
/// writes across it nor reuse them before it. Used around wgmma, whose accumulators and A operands
/// are read and written asynchronously, invisibly to the compiler.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(std::uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
template <int M, int N>
__device__ __forceinline__ void fence_regs(std::uint32_t (&r)[M][N]) {
#pragma unroll
  for (int i = 0; i < M; ++i) fence_regs(r[i]);
}

/// x's FP32 pattern plus k (mod 2^32), in place: AS_FP32(AS_INT32(x) + k) on the register that
/// holds x. Written as C++ (__float_as_uint, add, __uint_as_float), the add on the Hopper kernel's
/// accumulators went through copies of them (32 moves out and back around each P V); inside one
/// asm statement the pattern never leaves x's register.
__device__ __forceinline__ void add_to_pattern(float& x, std::uint32_t k) {
  asm("{\n.reg .b32 t;\nmov.b32 t, %0;\nadd.u32 t, t, %1;\nmov.b32 %0, t;\n}" : "+f"(x) : "r"(k));
}

// clang-format off
/// D[64 x 64] (+)= A[64 x 16] B[16 x 64]; A and B from shared memory (descriptors),
/// B K-major. scale_d = 0 overwrites D.
__device__ __forceinline__ void wgmma_m64n64k16_ss_kmajor(float (&d)[32], std::uint64_t desc_a,
                                        std::uint64_t desc_b, int scale_d) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("wgmma.mma_async m64n64k16");
#endif
}

/// D[64 x 256] (+)= A[64 x 16] B[16 x 256]; A and B from shared memory (descriptors), A K-major,
/// B MN-major (TransB: the P V product, V stored key-major) or K-major (a GEMM's B). scale_d = 0
/// overwrites D.
template <bool TransB>
__device__ __forceinline__ void wgmma_m64n256k16_ss(float (&d)[128], std::uint64_t desc_a,
                                        std::uint64_t desc_b, int scale_d) {
#if defined(AMLA_CUDA_SM90A_ENABLED)
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, %131;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransB ? 1 : 0));
#else
  AMLA_CUDA_ARCH_UNSUPPORTED("wgmma.mma_async m64n256k16");
#endif
}

// clang-format on

}  // namespace amla::cuda::detail::ptx
