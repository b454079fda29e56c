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

  // Calls fn(thread_index) once on each of the num_threads() threads and
  // returns when all calls have returned.
  void Run(const std::function<void(int thread_index)>& fn);

  // Splits [0, n) into num_threads() contiguous ranges, each a multiple of
  // `grain` except the last, and calls fn(begin, end, thread_index) for each
  // non-empty range.
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t begin, int64_t end, int thread_index)>& fn);

 private:
  void WorkerLoop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// Physical cores of this machine (hyper-threads counted once); at least 1.
int PhysicalCoreCount();

}  // namespace redline

#endif  // REDLINE_BASE_THREAD_POOL_H_
