#include "server/prep_workers.h"

#include <algorithm>

namespace redline::server {

PrepWorkers::PrepWorkers(int threads, size_t max_queued)
    : max_queued_(max_queued) {
  for (int i = 0; i < std::max(1, threads); ++i)
    threads_.emplace_back([this] { Run(); });
}

PrepWorkers::~PrepWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool PrepWorkers::TrySubmit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void PrepWorkers::Run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace redline::server
