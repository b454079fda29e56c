// PrepWorkers: a few threads that do the per-request work whose cost grows
// with the request — JSON parsing, chat-template rendering, tokenization,
// building /tokenize bodies — so the event loop never does. A task runs on
// a worker and posts its result back to the loop itself.
//
// Bounds: `threads` workers and at most `max_queued` tasks waiting; TrySubmit
// refuses beyond that (the caller answers 503 with Retry-After), so a burst
// of large requests cannot pile up unbounded work.
//
// Thread-safety: TrySubmit from any thread. The destructor stops the
// workers after the running tasks; queued ones are dropped (each task must
// tolerate never running: it owns only what it captured).
#ifndef REDLINE_SERVER_PREP_WORKERS_H_
#define REDLINE_SERVER_PREP_WORKERS_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace redline::server {

class PrepWorkers {
 public:
  PrepWorkers(int threads, size_t max_queued);
  ~PrepWorkers();
  PrepWorkers(const PrepWorkers&) = delete;
  PrepWorkers& operator=(const PrepWorkers&) = delete;

  // False when the queue is full or the workers are stopping.
  bool TrySubmit(std::function<void()> task);

 private:
  void Run();

  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace redline::server

#endif  // REDLINE_SERVER_PREP_WORKERS_H_
