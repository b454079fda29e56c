// Minimal leveled logging to stderr with fmt formatting.
//
//   RL_LOG(kInfo, "loaded {} tensors in {} ms", n, ms);
//
// Thread-safety: safe; each call writes one whole line.
#ifndef REDLINE_BASE_LOGGING_H_
#define REDLINE_BASE_LOGGING_H_

#include <fmt/format.h>

#include <chrono>
#include <string>
#include <string_view>

namespace redline {

enum class LogLevel {
  kDebug = 0,
  kInfo = 1,
  kWarning = 2,
  kError = 3,
  kOff = 4
};

// Messages below this level are dropped. Default kInfo; REDLINE_LOG_LEVEL
// (debug|info|warning|error|off) overrides it at start.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Prefix each line with the UTC time, "2026-01-31T12:00:00.123Z [I] ...".
// Off by default (command output); long-running servers turn it on.
void SetLogTimestamps(bool on);
// The prefix SetLogTimestamps(true) adds for `now` (without the space).
std::string LogTimestamp(std::chrono::system_clock::time_point now);
void LogLine(LogLevel level, std::string_view message);

}  // namespace redline

#define RL_LOG(level, ...)                                      \
  do {                                                          \
    if (::redline::LogLevel::level >= ::redline::GetLogLevel()) \
      ::redline::LogLine(::redline::LogLevel::level,            \
                         fmt::format(__VA_ARGS__));             \
  } while (0)

#endif  // REDLINE_BASE_LOGGING_H_
