// amla/detail/parallel.hpp: a minimal parallel-for over std::thread.
//
// The attention drivers split work into independent tasks (head groups, row chunks, key ranges
// for gathering) whose decomposition never depends on the thread count, so results are the same
// for any number of threads; this file only decides who runs which task. Threads are started per
// call: the tasks it serves take milliseconds, next to which a thread start (tens of
// microseconds) is noise, and nothing outlives the call. A thread that cannot be started (the
// system's thread limit, std::system_error) is not an error: the threads already running, the
// caller's among them, do all the tasks, and since the decomposition does not depend on the
// thread count the results are the same.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace amla::detail {

/// The thread count a request resolves to: requested when > 0, otherwise the hardware
/// concurrency (at least 1).
inline unsigned resolve_threads(int requested) noexcept {
  if (requested > 0) return static_cast<unsigned>(requested);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1u : hw;
}

/// parallel_for with the way a thread is started given: `start(work)` returns a std::thread
/// running work() or throws when it cannot start one (std::thread throws std::system_error).
/// Tests use it to refuse threads.
template <class Fn, class Start>
void parallel_for_started_by(std::size_t n, unsigned threads, Fn&& fn, Start&& start) {
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
  for (std::size_t w = 1; w < workers; ++w) {
    try {
      pool.push_back(start(work));
    } catch (...) {  // std::system_error (no thread), or std::bad_alloc
      break;         // those running, and this one, do every task
    }
  }
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

/// Calls fn(i) for every i in [0, n) on up to `threads` threads (the caller's thread is one of
/// them; fewer when the system refuses to start more, see the file comment). Tasks are handed out
/// in increasing order from a shared counter. The first exception a task throws is rethrown on
/// the caller's thread after every thread has stopped; tasks not yet started when it was thrown
/// are skipped.
template <class Fn>
void parallel_for(std::size_t n, unsigned threads, Fn&& fn) {
  parallel_for_started_by(n, threads, std::forward<Fn>(fn),
                          [](auto& work) { return std::thread(std::ref(work)); });
}

}  // namespace amla::detail
