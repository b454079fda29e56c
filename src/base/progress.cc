#include "base/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace redline {
namespace {

constexpr int kBarWidth = 24;

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string Amount(double done, double total, ProgressUnit unit) {
  switch (unit) {
    case ProgressUnit::kBytes: {
      const bool gib = total >= 1024.0 * 1048576.0;
      const double scale = gib ? 1024.0 * 1048576.0 : 1048576.0;
      return fmt::format("{:.1f}/{:.1f} {}", done / scale, total / scale,
                         gib ? "GiB" : "MiB");
    }
    case ProgressUnit::kSeconds:
      return FormatProgressDuration(done) + " / " +
             FormatProgressDuration(total);
    case ProgressUnit::kCount:
      return fmt::format("{:.0f}/{:.0f}", done, total);
    case ProgressUnit::kFraction:
      break;
  }
  return "";
}

}  // namespace

std::string FormatProgressDuration(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  if (seconds < 1) return fmt::format("{:.0f}ms", seconds * 1000);
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 3600) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
}

std::string FormatProgressLine(std::string_view label, double done,
                               double total, ProgressUnit unit,
                               double elapsed_s) {
  const double fraction = total > 0 ? std::clamp(done / total, 0.0, 1.0) : 1.0;
  std::string line = fmt::format("{} {:3.0f}%", label, fraction * 100);
  const std::string amount = Amount(done, total, unit);
  if (!amount.empty()) line += "  " + amount;
  if (fraction > 0 && fraction < 1 && elapsed_s >= 0.2) {
    line += "  ETA " +
            FormatProgressDuration(elapsed_s * (1 - fraction) / fraction);
  }
  return line;
}

Progress::Progress(std::string label, double total, ProgressUnit unit,
                   std::FILE* out, ProgressStyle style)
    : label_(std::move(label)),
      total_(total),
      unit_(unit),
      out_(out),
      style_(style),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (style_ == ProgressStyle::kAuto)
    style_ = isatty(fileno(out_)) ? ProgressStyle::kBar : ProgressStyle::kLines;
}

Progress::~Progress() { Finish(); }

void Progress::Set(double done) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || style_ == ProgressStyle::kOff) return;
  done_ = std::clamp(done, 0.0, total_ > 0 ? total_ : 0.0);
  const auto now = std::chrono::steady_clock::now();
  if (style_ == ProgressStyle::kBar) {
    if (drew_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  } else {
    const int step =
        total_ > 0 ? static_cast<int>(std::floor(done_ / total_ * 10)) : 10;
    // Plain lines: one per 10 % step, at most one a second, none at 100 %
    // (Finish prints the last one).
    if (step <= last_step_ || step >= 10 ||
        now - last_draw_ < std::chrono::seconds(1))
      return;
    last_step_ = step;
  }
  last_draw_ = now;
  DrawLocked(false);
}

void Progress::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (style_ == ProgressStyle::kOff) return;
  DrawLocked(true);
}

void Progress::DrawLocked(bool final_line) {
  const double elapsed = Seconds(std::chrono::steady_clock::now() - start_);
  std::string text;
  if (final_line) {
    text = fmt::format("{} {:3.0f}%", label_,
                       total_ > 0 ? done_ / total_ * 100 : 100.0);
    const std::string amount = Amount(done_, total_, unit_);
    if (!amount.empty()) text += "  " + amount;
    text += "  in " + FormatProgressDuration(elapsed);
  } else {
    text = FormatProgressLine(label_, done_, total_, unit_, elapsed);
  }
  if (style_ == ProgressStyle::kBar) {
    const double fraction =
        total_ > 0 ? std::clamp(done_ / total_, 0.0, 1.0) : 1.0;
    const int filled = static_cast<int>(fraction * kBarWidth);
    const std::string bar =
        std::string(filled, '#') + std::string(kBarWidth - filled, '.');
    // "\x1b[K" clears what a longer previous line left behind.
    fmt::print(out_, "\r[{}] {}\x1b[K{}", bar, text, final_line ? "\n" : "");
  } else {
    fmt::print(out_, "{}\n", text);
  }
  std::fflush(out_);
  drew_ = true;
}

}  // namespace redline
