// Progress of a long operation (writing a model, loading one, a benchmark)
// on standard error: a redrawn bar with ETA on a terminal, a few plain lines
// otherwise (logs, CI), nothing when off.
//
//   Progress progress("make-model: writing", total_bytes, ProgressUnit::kBytes);
//   for (...) progress.Set(done_bytes);
//   progress.Finish();   // final line; also done by the destructor
//
// Ownership: `out` is not owned and must outlive the object.
// Thread-safety: Set() and Finish() may be called from any thread; output is
// serialised by an internal mutex. Cost: Set() is a clock read and a compare
// unless it draws (a bar at most every 100 ms, a plain line per 10 % step and
// at most one a second).
#ifndef REDLINE_BASE_PROGRESS_H_
#define REDLINE_BASE_PROGRESS_H_

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace redline {

enum class ProgressUnit {
  kBytes,     // shown as MiB / GiB
  kFraction,  // total 1.0; shown as a percentage only
  kSeconds,   // shown as "12.0s / 60s"
  kCount,     // shown as "3/7"
};

enum class ProgressStyle {
  kAuto,   // kBar when `out` is a terminal, else kLines
  kBar,    // one line redrawn with '\r'
  kLines,  // a plain line per 10 % step
  kOff,
};

// "950ms", "12.0s", "3m05s", "1h02m".
std::string FormatProgressDuration(double seconds);

// One progress line without the bar: "label  45%  1.1/2.4 GiB  ETA 5.0s".
// ETA is omitted while nothing is done or under 0.2 s has passed.
std::string FormatProgressLine(std::string_view label, double done,
                               double total, ProgressUnit unit,
                               double elapsed_s);

class Progress {
 public:
  Progress(std::string label, double total, ProgressUnit unit,
           std::FILE* out = stderr, ProgressStyle style = ProgressStyle::kAuto);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Records `done` (clamped to [0, total]) and draws if due.
  void Set(double done);
  // Draws the final state once ("... done in 3.2s"); later calls do nothing.
  void Finish();

  ProgressStyle style() const { return style_; }

 private:
  void DrawLocked(bool final_line);

  const std::string label_;
  const double total_;
  const ProgressUnit unit_;
  std::FILE* const out_;
  ProgressStyle style_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  double done_ = 0;
  std::chrono::steady_clock::time_point last_draw_;
  int last_step_ = 0;  // kLines: the last 10 % step printed
  bool finished_ = false;
  bool drew_ = false;
};

}  // namespace redline

#endif  // REDLINE_BASE_PROGRESS_H_
