#include "http/event_loop.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <utility>

#include "http/event_loop_impl.h"

namespace redline::http {

namespace asio = boost::asio;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

EventLoop::EventLoop() : impl_(std::make_unique<Impl>()) {}
EventLoop::~EventLoop() = default;

uint64_t EventLoop::Run() { return impl_->io.run(); }

uint64_t EventLoop::RunFor(int64_t max_ns) {
  return impl_->io.run_for(std::chrono::nanoseconds(max_ns));
}

void EventLoop::Stop() { impl_->io.stop(); }
void EventLoop::Restart() { impl_->io.restart(); }

void EventLoop::Post(std::function<void()> task) {
  asio::post(impl_->io, std::move(task));
}

bool EventLoop::InLoopThread() const {
  return impl_->io.get_executor().running_in_this_thread();
}

// The timer state is shared with the pending wait handler so that destroying
// the Timer while a wait is queued is safe: the handler sees `cancelled`.
struct Timer::State {
  explicit State(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;
  std::function<void()> fn;
  uint64_t generation = 0;
};

Timer::Timer(EventLoop& loop)
    : state_(std::make_shared<State>(loop.impl()->io)) {}

Timer::~Timer() {
  state_->generation++;
  state_->fn = nullptr;
  state_->timer.cancel();
}

void Timer::ExpireAt(int64_t deadline_ns, std::function<void()> fn) {
  State& s = *state_;
  s.fn = std::move(fn);
  const uint64_t generation = ++s.generation;
  s.timer.expires_at(std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(deadline_ns)));
  s.timer.async_wait(
      [state = state_, generation](const boost::system::error_code& ec) {
        if (ec || state->generation != generation || !state->fn) return;
        auto fn = std::move(state->fn);
        state->fn = nullptr;
        fn();
      });
}

void Timer::ExpireAfter(int64_t delay_ns, std::function<void()> fn) {
  ExpireAt(NowNs() + delay_ns, std::move(fn));
}

void Timer::Cancel() {
  state_->generation++;
  state_->fn = nullptr;
  state_->timer.cancel();
}

}  // namespace redline::http
