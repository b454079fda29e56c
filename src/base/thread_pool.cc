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

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int PhysicalCoreCount() {
  // Count distinct (physical id, core id) pairs; fall back to the logical
  // count.
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
  for (int i = 1; i < num_threads_; ++i)
    workers_.emplace_back([this, i] { WorkerLoop(i); });
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
    const std::function<void(int)>* job = job_.load(std::memory_order_seq_cst);
    // A ParallelFor may have ended and the next job begun since we woke; then
    // `job` may belong to that next job: skip, the loop picks it up.
    if (generation_.load(std::memory_order_seq_cst) != gen) continue;
    if (job != nullptr) {
      const int64_t t0 = NowNs();
      (*job)(index);
      busy_ns_.fetch_add(NowNs() - t0, std::memory_order_relaxed);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    } else {
      // A ParallelFor: register, then make sure it is still the one we woke
      // for.
      for_inside_.fetch_add(1, std::memory_order_seq_cst);
      if (for_active_.load(std::memory_order_seq_cst) &&
          for_generation_.load(std::memory_order_seq_cst) == gen) {
        RunChunks(index);
      }
      for_inside_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }
}

void ThreadPool::Run(const std::function<void(int)>& fn) {
  if (num_threads_ == 1) {
    const int64_t t0 = NowNs();
    fn(0);
    busy_ns_.fetch_add(NowNs() - t0, std::memory_order_relaxed);
    return;
  }
  job_.store(&fn, std::memory_order_seq_cst);
  pending_.store(num_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  const int64_t t0 = NowNs();
  fn(0);
  busy_ns_.fetch_add(NowNs() - t0, std::memory_order_relaxed);
  // Spin first (workers usually finish within microseconds of us), then
  // yield: on an oversubscribed machine a descheduled worker needs our core.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  job_.store(nullptr, std::memory_order_seq_cst);
}

void ThreadPool::RunChunks(int thread_index) {
  const int64_t t0 = NowNs();
  for (;;) {
    const int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= for_chunks_) {
      busy_ns_.fetch_add(NowNs() - t0, std::memory_order_relaxed);
      return;
    }
    const int64_t u0 = for_units_ * c / for_chunks_;
    const int64_t u1 = for_units_ * (c + 1) / for_chunks_;
    const int64_t begin = u0 * for_grain_;
    const int64_t end = std::min(for_n_, u1 * for_grain_);
    if (begin < end) (*for_fn_)(begin, end, thread_index);
    done_chunks_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(
    int64_t n, int64_t grain,
    const std::function<void(int64_t, int64_t, int)>& fn,
    int64_t chunks_per_thread) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = (n + grain - 1) / grain;
  if (num_threads_ == 1 || units == 1) {
    const int64_t t0 = NowNs();
    fn(0, n, 0);
    busy_ns_.fetch_add(NowNs() - t0, std::memory_order_relaxed);
    return;
  }
  RL_DCHECK(chunks_per_thread >= 1) << chunks_per_thread;
  for_fn_ = &fn;
  for_n_ = n;
  for_grain_ = grain;
  for_units_ = units;
  for_chunks_ = std::min<int64_t>(
      units, std::max<int64_t>(chunks_per_thread, 1) * num_threads_);
  next_chunk_.store(0, std::memory_order_relaxed);
  done_chunks_.store(0, std::memory_order_relaxed);
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  for_generation_.store(gen, std::memory_order_seq_cst);
  for_active_.store(true, std::memory_order_seq_cst);
  generation_.store(gen, std::memory_order_seq_cst);
  generation_.notify_all();
  RunChunks(0);
  for (int spins = 0;
       done_chunks_.load(std::memory_order_acquire) != for_chunks_; ++spins) {
    if (spins < 4096) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  // No worker may still be looking at this job when we return.
  for_active_.store(false, std::memory_order_seq_cst);
  while (for_inside_.load(std::memory_order_seq_cst) != 0) CpuRelax();
  for_fn_ = nullptr;
}

}  // namespace redline
