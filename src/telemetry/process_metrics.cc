#include "telemetry/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace redline::telemetry {
namespace {

Result<std::string> ReadSmallFile(const char* path) {
  std::ifstream in(path);
  if (!in) return Status::Unimplemented(std::string(path) + " is not readable");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Seconds since boot at which the process started, from /proc/self/stat
// field 22 (clock ticks), converted with /proc/stat's btime to Unix time.
double BootTimeSeconds() {
  auto stat = ReadSmallFile("/proc/stat");
  if (!stat.ok()) return 0;
  const size_t pos = stat->find("\nbtime ");
  if (pos == std::string::npos) return 0;
  return std::strtod(stat->c_str() + pos + 7, nullptr);
}

}  // namespace

Result<ProcessStats> ReadProcessStats() {
  ProcessStats s;
  RL_ASSIGN_OR_RETURN(std::string stat, ReadSmallFile("/proc/self/stat"));
  // The command name (field 2) is in parentheses and may hold spaces; the
  // fields after the last ')' are space separated, starting with field 3.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos)
    return Status::IoError("unexpected /proc/self/stat format");
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  std::vector<std::string> v;
  while (fields >> f) v.push_back(f);
  // v[0] is field 3 (state): utime = 14, stime = 15, starttime = 22,
  // vsize = 23, rss (pages) = 24.
  if (v.size() < 22) return Status::IoError("short /proc/self/stat");
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  s.cpu_seconds = (std::strtod(v[11].c_str(), nullptr) +
                   std::strtod(v[12].c_str(), nullptr)) /
                  ticks;
  s.start_time_seconds =
      BootTimeSeconds() + std::strtod(v[19].c_str(), nullptr) / ticks;
  s.virtual_bytes = std::strtoll(v[20].c_str(), nullptr, 10);
  s.resident_bytes =
      static_cast<int64_t>(std::strtod(v[21].c_str(), nullptr) * page);
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') ++s.open_fds;
    }
    closedir(dir);
    --s.open_fds;  // the directory stream itself
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0)
    s.max_fds = static_cast<int64_t>(lim.rlim_cur);
  return s;
}

void RegisterProcessMetrics(Registry& registry) {
  Counter& cpu =
      registry
          .AddCounter("process_cpu_seconds_total",
                      "Total user and system CPU time spent in seconds.")
          .Labels({});
  Gauge& rss = registry
                   .AddGauge("process_resident_memory_bytes",
                             "Resident memory size in bytes.")
                   .Labels({});
  Gauge& vms = registry
                   .AddGauge("process_virtual_memory_bytes",
                             "Virtual memory size in bytes.")
                   .Labels({});
  Gauge& fds =
      registry.AddGauge("process_open_fds", "Number of open file descriptors.")
          .Labels({});
  Gauge& max_fds = registry
                       .AddGauge("process_max_fds",
                                 "Maximum number of open file descriptors.")
                       .Labels({});
  Gauge& start =
      registry
          .AddGauge("process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.")
          .Labels({});
  registry.AddCollector([&cpu, &rss, &vms, &fds, &max_fds, &start] {
    auto s = ReadProcessStats();
    if (!s.ok()) return;
    cpu.SetTotal(s->cpu_seconds);
    rss.Set(static_cast<double>(s->resident_bytes));
    vms.Set(static_cast<double>(s->virtual_bytes));
    fds.Set(static_cast<double>(s->open_fds));
    max_fds.Set(static_cast<double>(s->max_fds));
    start.Set(s->start_time_seconds);
  });
}

}  // namespace redline::telemetry
