// amla/detail/parallel.hpp: a minimal parallel-for over std::thread.
//
// The attention drivers split work into independent tasks (head groups, row chunks, key ranges
// for gathering) whose decomposition never depends on the thread count, so results are the same
// for any number of threads; this file only decides who runs which task. Threads are started per
// call: the tasks it serves take milliseconds, next to which a thread start (tens of
// microseconds) is noise, and nothing outlives the call.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace amla::detail {

/// The thread count a request resolves to: requested when > 0, otherwise the hardware
/// concurrency (at least 1).
inline unsigned resolve_threads(int requested) noexcept {
  if (requested > 0) return static_cast<unsigned>(requested);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1u : hw;
}

/// Calls fn(i) for every i in [0, n) on up to `threads` threads (the caller's thread is one of
/// them). Tasks are handed out in increasing order from a shared counter. The first exception a
/// task throws is rethrown on the caller's thread after every thread has stopped; tasks not yet
/// started when it was thrown are skipped.
template <class Fn>
void parallel_for(std::size_t n, unsigned threads, Fn&& fn) {
  if (n == 0) return;
  const std::size_t workers = std::min<std::size_t>(n, std::max(threads, 1u));
  if (workers == 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&]() {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace amla::detail
