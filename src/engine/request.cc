#include "engine/request.h"

#include <utility>

namespace redline::engine {

void RequestStream::Push(RequestEvent event) {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
    notify = notifier_;
  }
  cv_.notify_one();
  if (notify) notify();
}

bool RequestStream::Pop(RequestEvent* event,
                        std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); }))
    return false;
  *event = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool RequestStream::TryPop(RequestEvent* event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.empty()) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  return true;
}

void RequestStream::SetNotifier(std::function<void()> notifier) {
  std::lock_guard<std::mutex> lock(mu_);
  notifier_ = std::move(notifier);
}

}  // namespace redline::engine
