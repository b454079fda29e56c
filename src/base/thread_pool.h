// ThreadPool: a fixed set of worker threads for data-parallel kernels.
//
// The calling thread takes part as worker 0, so a pool of N threads starts
// N-1 OS threads. Workers spin briefly between jobs (a decode step issues a
// few hundred small jobs per token; waking a sleeping thread costs tens of
// microseconds) and then sleep on a futex-style wait.
//
// Thread-safety: Run/ParallelFor must be called from one thread at a time
// (the engine's owner thread). Jobs must not call back into the same pool.
#ifndef REDLINE_BASE_THREAD_POOL_H_
#define REDLINE_BASE_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace redline {

class ThreadPool {
 public:
  // num_threads <= 0 selects PhysicalCoreCount().
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Nanoseconds the threads (the caller as worker 0 included) have spent
  // running jobs, summed over threads, since construction; its rate over
  // num_threads() is the pool's busy ratio, the rest is spinning, sleeping
  // and waiting for the slowest thread. Thread-safe (relaxed).
  int64_t busy_ns() const { return busy_ns_.load(std::memory_order_relaxed); }

  // Calls fn(thread_index) once on each of the num_threads() threads and
  // returns when all calls have returned.
  void Run(const std::function<void(int thread_index)>& fn);

  // Splits [0, n) into contiguous chunks, each a multiple of `grain` except
  // the last, and calls fn(begin, end, thread_index) once per chunk. Threads
  // claim chunks as they come (chunks_per_thread per thread, at most one per
  // unit of `grain`), so a thread the OS has descheduled — a busy machine —
  // does not hold the others up: the caller alone can finish every chunk
  // not yet claimed. More chunks spread the work better; fewer give each
  // thread longer contiguous ranges (what memory-bound kernels want). No two
  // concurrent calls share a thread_index.
  static constexpr int64_t kDefaultChunksPerThread = 4;
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t begin, int64_t end,
                                            int thread_index)>& fn,
                   int64_t chunks_per_thread = kDefaultChunksPerThread);

 private:
  void WorkerLoop(int index);
  // Claims and runs chunks of the current ParallelFor until none are left.
  void RunChunks(int thread_index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::atomic<const std::function<void(int)>*> job_{nullptr};  // Run jobs only
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // Two clock reads per thread per job: tens of ns against the microseconds
  // a job takes.
  std::atomic<int64_t> busy_ns_{0};

  // ParallelFor state: chunks handed out through next_chunk_; workers that
  // wake up late find none left and never touch a finished job (they check
  // for_generation_ and for_active_ after registering in for_inside_).
  const std::function<void(int64_t, int64_t, int)>* for_fn_ = nullptr;
  int64_t for_n_ = 0, for_grain_ = 1, for_units_ = 0, for_chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<int64_t> done_chunks_{0};
  std::atomic<int> for_inside_{0};
  std::atomic<bool> for_active_{false};
  std::atomic<uint64_t> for_generation_{0};
};

// Physical cores of this machine (hyper-threads counted once); at least 1.
int PhysicalCoreCount();

}  // namespace redline

#endif  // REDLINE_BASE_THREAD_POOL_H_
