#include "base/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace redline {
namespace {

LogLevel InitialLevel() {
  const char* env = std::getenv("REDLINE_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(env, "warning") == 0) return LogLevel::kWarning;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  if (std::strcmp(env, "off") == 0) return LogLevel::kOff;
  return LogLevel::kInfo;
}

std::atomic<LogLevel>& Level() {
  static std::atomic<LogLevel> level{InitialLevel()};
  return level;
}

std::atomic<bool> g_timestamps{false};

}  // namespace

void SetLogTimestamps(bool on) { g_timestamps.store(on); }

std::string LogTimestamp(std::chrono::system_clock::time_point now) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      now.time_since_epoch())
                      .count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
}

void SetLogLevel(LogLevel level) { Level().store(level); }
LogLevel GetLogLevel() { return Level().load(std::memory_order_relaxed); }

void LogLine(LogLevel level, std::string_view message) {
  static constexpr const char* kTags[] = {"D", "I", "W", "E", ""};
  std::string line =
      fmt::format("[{}] {}\n", kTags[static_cast<int>(level)], message);
  if (g_timestamps.load(std::memory_order_relaxed))
    line = LogTimestamp(std::chrono::system_clock::now()) + " " + line;
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace redline
