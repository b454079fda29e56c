// EventLoop: one I/O event loop (a Boost.Asio io_context behind a pimpl) that
// runs sockets, timers and posted tasks for the http Client and Server.
//
// Threading model: the loop is driven by whoever calls Run() (normally one
// dedicated thread). Every callback (timers, posted tasks, client and server
// handlers) runs on that thread, so code attached to one loop needs no locks.
// Post() is the only method that is safe to call from any thread.
//
// Ownership: the EventLoop must outlive every Client, Server and Timer
// attached to it.
//
// Cost: Post() allocates one small task; timers cost one heap node in the
// loop's timer queue per ExpireAt().
#ifndef REDLINE_HTTP_EVENT_LOOP_H_
#define REDLINE_HTTP_EVENT_LOOP_H_

#include <cstdint>
#include <functional>
#include <memory>

namespace redline::http {

// Monotonic time in nanoseconds (std::chrono::steady_clock). Every timestamp
// the http layer hands out uses this clock.
int64_t NowNs();

class EventLoop {
 public:
  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs the loop on the calling thread until Stop() is called or it runs out
  // of work. Returns the number of handlers that ran.
  uint64_t Run();

  // Runs ready handlers for at most `max_ns`, then returns (used by tests).
  uint64_t RunFor(int64_t max_ns);

  // Makes Run() return as soon as possible. Safe from any thread.
  void Stop();

  // Clears the stopped state so Run() can be called again.
  void Restart();

  // Queues `task` to run on the loop thread. Safe from any thread.
  void Post(std::function<void()> task);

  // True when the calling thread is currently inside Run() of this loop.
  bool InLoopThread() const;

  // Implementation access for Client, Server and Timer (event_loop_impl.h).
  struct Impl;
  Impl* impl() { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

// A one-shot, re-armable timer on an EventLoop. Use it from the loop thread.
// Destroying the Timer cancels a pending callback (which is then never run).
class Timer {
 public:
  explicit Timer(EventLoop& loop);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Calls `fn` once at (or just after) the absolute NowNs() time
  // `deadline_ns`. Re-arming cancels the previous callback.
  void ExpireAt(int64_t deadline_ns, std::function<void()> fn);

  // Same with a delay relative to now.
  void ExpireAfter(int64_t delay_ns, std::function<void()> fn);

  // Cancels a pending callback; a no-op when none is pending.
  void Cancel();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace redline::http

#endif  // REDLINE_HTTP_EVENT_LOOP_H_
