#include "base/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "base/check.h"

namespace redline {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// How long an idle worker spins before it sleeps. Long enough to bridge the
// gap between the kernels of one decode step, short enough not to burn a
// core while the engine waits for requests.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(2000);

}  // namespace

int PhysicalCoreCount() {
  // Count distinct (physical id, core id) pairs; fall back to the logical count.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0;
  while (std::getline(in, line)) {
    auto value = [&]() { return std::stoi(line.substr(line.find(':') + 1)); };
    if (line.rfind("physical id", 0) == 0) phys = value();
    if (line.rfind("core id", 0) == 0) cores.insert({phys, value()});
  }
  int logical = static_cast<int>(std::thread::hardware_concurrency());
  int n = cores.empty() ? logical : static_cast<int>(cores.size());
  if (logical > 0) n = std::min(n, logical);
  return std::max(n, 1);
}

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0 ? num_threads : PhysicalCoreCount()) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto spin_start = std::chrono::steady_clock::now();
    uint64_t gen;
    int spins = 0;
    while ((gen = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < 4096) {
        CpuRelax();
        continue;
      }
      // Past the first spins, yield so an oversubscribed machine still
      // makes progress, and sleep once the job gap is long.
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() - spin_start > kSpinBeforeSleep) {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::Run(const std::function<void(int)>& fn) {
  if (num_threads_ == 1) {
    fn(0);
    return;
  }
  job_ = &fn;
  pending_.store(num_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0);
  // Spin first (workers usually finish within microseconds of us), then
  // yield: on an oversubscribed machine a descheduled worker needs our core.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = (n + grain - 1) / grain;
  const int parts = static_cast<int>(std::min<int64_t>(units, num_threads_));
  if (parts <= 1) {
    fn(0, n, 0);
    return;
  }
  Run([&](int t) {
    if (t >= parts) return;
    const int64_t u0 = units * t / parts;
    const int64_t u1 = units * (t + 1) / parts;
    const int64_t begin = u0 * grain;
    const int64_t end = std::min(n, u1 * grain);
    if (begin < end) fn(begin, end, t);
  });
}

}  // namespace redline
