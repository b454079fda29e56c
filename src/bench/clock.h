// Injectable monotonic clock (nanoseconds). Production code uses
// SteadyClock (the same clock as http::NowNs()); tests use FakeClock and
// move time by hand, so nothing in a unit test depends on real time.
//
// Thread-safety: SteadyClock is thread-safe; FakeClock is thread-compatible.
#ifndef REDLINE_BENCH_CLOCK_H_
#define REDLINE_BENCH_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace redline::bench {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNs() const = 0;
};

class SteadyClock final : public Clock {
 public:
  int64_t NowNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_ns = 1'000'000'000) : now_ns_(start_ns) {}
  int64_t NowNs() const override { return now_ns_; }
  void AdvanceNs(int64_t ns) { now_ns_ += ns; }
  void SetNs(int64_t ns) { now_ns_ = ns; }

 private:
  int64_t now_ns_;
};

}  // namespace redline::bench

#endif  // REDLINE_BENCH_CLOCK_H_
