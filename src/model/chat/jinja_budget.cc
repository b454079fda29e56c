#include "model/chat/jinja_budget.h"

#include <string>

namespace redline::model::chat::jinja {
namespace {

// Reading the clock costs about as much as a few evaluation steps, so it is
// read once per this many work units (each Spend call counts kCallUnits on
// top of what it charges, so many small charges also reach it). At the
// interpreter's speed this is a few tens of microseconds.
constexpr int64_t kClockEveryUnits = 8192;
constexpr int64_t kCallUnits = 32;

thread_local Meter* t_current = nullptr;

std::string Bytes(size_t n) {
  if (n != 0 && n % (size_t{1} << 20) == 0)
    return std::to_string(n >> 20) + " MiB";
  return std::to_string(n) + " bytes";
}

}  // namespace

Meter::Meter(const RenderBudget& budget) : budget_(budget) {
  if (budget_.max_time_ms > 0) {
    has_deadline_ = true;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::milliseconds(budget_.max_time_ms);
  }
}

bool Meter::Spend(int64_t units) {
  if (exhausted()) return false;
  if (units < 0) units = 0;
  if (units > budget_.max_work_units - work_units_) {
    FailWork();
    return false;
  }
  work_units_ += units;
  unclocked_units_ += units + kCallUnits;
  if (unclocked_units_ >= kClockEveryUnits) return CheckTime();
  return true;
}

bool Meter::Reserve(size_t bytes) {
  if (exhausted()) return false;
  // Held bytes may pass the budget by what the last operation made; then
  // even Reserve(0) fails.
  if (held_bytes_ > budget_.max_memory_bytes || bytes > memory_headroom()) {
    FailMemory();
    return false;
  }
  return true;
}

bool Meter::CheckTime() {
  if (exhausted()) return false;
  unclocked_units_ = 0;
  if (has_deadline_ && std::chrono::steady_clock::now() > deadline_) {
    FailTime();
    return false;
  }
  return true;
}

const Status& Meter::ExceedMemory() {
  if (!exhausted()) FailMemory();
  return status_;
}

size_t Meter::memory_headroom() const {
  return held_bytes_ >= budget_.max_memory_bytes
             ? 0
             : budget_.max_memory_bytes - held_bytes_;
}

void Meter::FailWork() {
  status_ = Status::ResourceExhausted(
      "chat template exceeded its work budget (" +
      std::to_string(budget_.max_work_units) + " units)");
}

void Meter::FailMemory() {
  status_ =
      Status::ResourceExhausted("chat template exceeded its memory budget of " +
                                Bytes(budget_.max_memory_bytes));
}

void Meter::FailTime() {
  status_ =
      Status::ResourceExhausted("chat template exceeded its time budget of " +
                                std::to_string(budget_.max_time_ms) + " ms");
}

Meter* Meter::Current() { return t_current; }

MeterScope::MeterScope(Meter* meter) : saved_(t_current) { t_current = meter; }

MeterScope::~MeterScope() { t_current = saved_; }

}  // namespace redline::model::chat::jinja
