// The resource budget of one chat-template render: work, memory and time.
//
// A chat template read from a model file is untrusted code. RenderLimits
// (render_limits.h) bounds its structure (nesting, call depth, loop
// iterations, the size of one string); RenderBudget bounds what it may
// spend, so that no template can hang a server thread or exhaust its memory
// whatever the sizes of the strings and lists it works on.
//
// RenderBudget is the knob (ChatTemplateInputs::budget, RenderOptions::budget);
// Meter is the interpreter's running account of one render against it.
#ifndef REDLINE_MODEL_CHAT_JINJA_BUDGET_H_
#define REDLINE_MODEL_CHAT_JINJA_BUDGET_H_

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace redline::model::chat {

// What one render may spend. Exceeding any bound fails the render with a
// ResourceExhausted Status naming it, e.g. "chat template exceeded its
// memory budget of 64 MiB".
struct RenderBudget {
  // Work units summed over the render: one per expression or statement
  // evaluated and one per byte or element an operation reads, compares,
  // copies or writes, charged from the sizes of its inputs before it runs.
  // 2^28 units take roughly 0.1-0.5 s of CPU; rendering a real template
  // costs a few units per byte of the conversation.
  int64_t max_work_units = int64_t{1} << 28;
  // Bytes held at once by the strings, lists and dicts the render made, its
  // output buffers, and the temporaries of the operation in progress (the
  // render's inputs are not counted).
  size_t max_memory_bytes = size_t{64} << 20;
  // Wall-clock time from the start of the render, checked at every loop
  // iteration and every few thousand work units. 0 or less: no deadline
  // (for reproducible runs, e.g. when debugging a fuzzer finding).
  int64_t max_time_ms = 100;
};

}  // namespace redline::model::chat

namespace redline::model::chat::jinja {

using RenderBudget = ::redline::model::chat::RenderBudget;

// The running account of one render. Exhaustion is sticky: once a budget is
// exceeded every later Spend, Reserve and CheckTime fails too, so code that
// cannot return a Status (an equality test deep inside nested lists) can
// stop early with any answer and leave it to the interpreter's next check
// to fail the render.
//
// Thread-safety: none; one render, one thread.
class Meter {
 public:
  explicit Meter(const RenderBudget& budget);

  // Charges `units` of work; false once the work or time budget is spent.
  bool Spend(int64_t units);
  // Whether `bytes` more may be held without exceeding the memory budget;
  // false (and exhausted) otherwise. Holds nothing itself. Reserve(0)
  // checks what is held already.
  bool Reserve(size_t bytes);
  // Checks the deadline now; false once it has passed.
  bool CheckTime();
  // Marks the memory budget exceeded (for a size computed not to fit, which
  // Reserve could not even be asked about) and returns the error.
  const Status& ExceedMemory();

  // Bytes of a value the render made (Hold) or let go of (Release).
  void Hold(size_t bytes) { held_bytes_ += bytes; }
  void Release(size_t bytes) { held_bytes_ -= bytes; }

  bool exhausted() const { return !status_.ok(); }
  // The error naming the exceeded budget; OK while none is.
  const Status& status() const { return status_; }
  int64_t work_units() const { return work_units_; }
  size_t held_bytes() const { return held_bytes_; }
  // Bytes that may still be held before the memory budget is exceeded.
  size_t memory_headroom() const;
  const RenderBudget& budget() const { return budget_; }

  // The meter of the render running on this thread (see MeterScope), or
  // null. Value factories account the strings, lists and dicts they make
  // to it.
  static Meter* Current();

 private:
  friend class MeterScope;
  void FailWork();
  void FailMemory();
  void FailTime();

  RenderBudget budget_;
  std::chrono::steady_clock::time_point deadline_;
  bool has_deadline_ = false;
  int64_t work_units_ = 0;
  // Work charged since the clock was last read.
  int64_t unclocked_units_ = 0;
  size_t held_bytes_ = 0;
  Status status_;
};

// Makes `meter` Meter::Current() on this thread for the scope's lifetime.
// Every value made while the scope is active must be destroyed before the
// meter is (values made by a render never outlive it).
class MeterScope {
 public:
  explicit MeterScope(Meter* meter);
  ~MeterScope();
  MeterScope(const MeterScope&) = delete;
  MeterScope& operator=(const MeterScope&) = delete;

 private:
  Meter* saved_;
};

}  // namespace redline::model::chat::jinja

#endif  // REDLINE_MODEL_CHAT_JINJA_BUDGET_H_
