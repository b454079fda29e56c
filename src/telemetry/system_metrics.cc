#include "telemetry/system_metrics.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>

#include "telemetry/process_metrics.h"

namespace redline::telemetry {
namespace {

std::optional<std::string> ReadSmallFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string out(8192, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

std::optional<int64_t> ToInt(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.remove_suffix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0)
    return std::nullopt;
  return v;
}

// The value of "key <number>" or "key: <number> kB" on its own line.
std::optional<int64_t> FieldOf(std::string_view text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.substr(0, key.size()) != key) continue;
    std::string_view rest = line.substr(key.size());
    if (!rest.empty() && rest.front() == ':') rest.remove_prefix(1);
    if (rest.empty() || (rest.front() != ' ' && rest.front() != '\t')) continue;
    if (rest.ends_with(" kB")) rest.remove_suffix(3);
    return ToInt(rest);
  }
  return std::nullopt;
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::optional<CpuTimes> ParseProcStat(std::string_view text) {
  if (text.substr(0, 4) != "cpu ") return std::nullopt;
  const size_t eol = text.find('\n');
  std::istringstream in(std::string(text.substr(4, eol - 4)));
  uint64_t v[10] = {};
  int n = 0;
  while (n < 10 && in >> v[n]) ++n;
  if (n < 4) return std::nullopt;
  CpuTimes t;
  // user nice system idle iowait irq softirq steal (guest is in user).
  for (int i = 0; i < std::min(n, 8); ++i) t.total += v[i];
  t.idle = v[3] + (n > 4 ? v[4] : 0);
  return t;
}

std::optional<int64_t> ParseSwapIn(std::string_view vmstat) {
  return FieldOf(vmstat, "pswpin");
}

std::optional<MemInfo> ParseMemInfo(std::string_view meminfo) {
  auto total = FieldOf(meminfo, "MemTotal");
  auto avail = FieldOf(meminfo, "MemAvailable");
  if (!total || !avail) return std::nullopt;
  return MemInfo{*total * 1024, *avail * 1024};
}

std::optional<int64_t> ParseCgroupBytes(std::string_view text) {
  auto v = ToInt(text);
  // cgroup v1 reports "no limit" as a huge page-rounded number.
  if (!v || *v >= (int64_t{1} << 62)) return std::nullopt;
  return v;
}

std::optional<int64_t> ParsePressureTotalUs(std::string_view text) {
  if (text.substr(0, 5) != "some ") return std::nullopt;
  const size_t eol = text.find('\n');
  std::string_view line = text.substr(0, eol);
  const size_t at = line.find("total=");
  if (at == std::string_view::npos) return std::nullopt;
  return ToInt(line.substr(at + 6));
}

SystemSample SystemSampler::Sample() {
  SystemSample s;
  std::optional<CpuTimes> cpu;
  if (auto t = ReadSmallFile("/proc/stat")) cpu = ParseProcStat(*t);
  double process_cpu_s = -1;
  if (auto p = ReadProcessStats(); p.ok()) process_cpu_s = p->cpu_seconds;
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  const int64_t now_ns = SteadyNs();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cpu && last_cpu_ && cpu->total > last_cpu_->total) {
      const double dt = static_cast<double>(cpu->total - last_cpu_->total);
      const double didle = static_cast<double>(cpu->idle - last_cpu_->idle);
      s.system_cpu_utilization = std::clamp(1.0 - didle / dt, 0.0, 1.0);
    }
    if (process_cpu_s >= 0 && last_process_cpu_s_ >= 0 && ncpu > 0 &&
        now_ns > last_wall_ns_) {
      const double wall_s = static_cast<double>(now_ns - last_wall_ns_) / 1e9;
      s.process_cpu_utilization =
          std::clamp((process_cpu_s - last_process_cpu_s_) / wall_s /
                         static_cast<double>(ncpu),
                     0.0, 1.0);
    }
    if (cpu) last_cpu_ = cpu;
    last_process_cpu_s_ = process_cpu_s;
    last_wall_ns_ = now_ns;
  }
  // Memory: the cgroup (v2, then v1) when it has a limit, else the machine.
  std::optional<int64_t> limit, used;
  if (auto t = ReadSmallFile("/sys/fs/cgroup/memory.max")) {
    limit = ParseCgroupBytes(*t);
    if (auto u = ReadSmallFile("/sys/fs/cgroup/memory.current"))
      used = ToInt(*u);
  } else if (auto t1 =
                 ReadSmallFile("/sys/fs/cgroup/memory/memory.limit_in_bytes")) {
    limit = ParseCgroupBytes(*t1);
    if (auto u = ReadSmallFile("/sys/fs/cgroup/memory/memory.usage_in_bytes"))
      used = ToInt(*u);
  }
  if (!limit || !used) {
    if (auto t = ReadSmallFile("/proc/meminfo")) {
      if (auto m = ParseMemInfo(*t)) {
        limit = m->total_bytes;
        used = m->total_bytes - m->available_bytes;
      }
    }
  }
  s.memory_limit_bytes = limit.value_or(-1);
  s.memory_used_bytes = used.value_or(-1);
  if (auto t = ReadSmallFile("/proc/vmstat"))
    s.swap_in_pages = ParseSwapIn(*t).value_or(-1);
  if (auto t = ReadSmallFile("/proc/pressure/cpu")) {
    if (auto us = ParsePressureTotalUs(*t))
      s.cpu_pressure_stall_seconds = static_cast<double>(*us) / 1e6;
  }
  return s;
}

void RegisterSystemMetrics(Registry& registry, const std::string& prefix) {
  Gauge& sys_cpu =
      registry
          .AddGauge(prefix + "system_cpu_utilization",
                    "Share of all CPUs busy (any process) since the last "
                    "scrape, 0..1")
          .Labels({});
  Gauge& proc_cpu =
      registry
          .AddGauge(prefix + "process_cpu_utilization",
                    "Share of all CPUs used by this process since the last "
                    "scrape, 0..1")
          .Labels({});
  Gauge& used = registry
                    .AddGauge(prefix + "memory_used_bytes",
                              "Memory in use: the cgroup's when it has a "
                              "limit, else the machine's")
                    .Labels({});
  Gauge& limit = registry
                     .AddGauge(prefix + "memory_limit_bytes",
                               "The memory limit that applies: the cgroup's "
                               "when set, else the machine's total")
                     .Labels({});
  Counter& swap_in =
      registry
          .AddCounter(prefix + "swap_in_pages_total",
                      "Pages swapped in, machine-wide (/proc/vmstat pswpin)")
          .Labels({});
  Counter& stall = registry
                       .AddCounter(prefix + "cpu_pressure_stall_seconds_total",
                                   "Time some task waited for a CPU "
                                   "(/proc/pressure/cpu), machine-wide")
                       .Labels({});
  auto sampler = std::make_shared<SystemSampler>();
  sampler->Sample();  // baseline for the first scrape's utilisations
  registry.AddCollector(
      [sampler, &sys_cpu, &proc_cpu, &used, &limit, &swap_in, &stall] {
        const SystemSample s = sampler->Sample();
        if (s.system_cpu_utilization >= 0)
          sys_cpu.Set(s.system_cpu_utilization);
        if (s.process_cpu_utilization >= 0)
          proc_cpu.Set(s.process_cpu_utilization);
        if (s.memory_used_bytes >= 0)
          used.Set(static_cast<double>(s.memory_used_bytes));
        if (s.memory_limit_bytes >= 0)
          limit.Set(static_cast<double>(s.memory_limit_bytes));
        if (s.swap_in_pages >= 0)
          swap_in.SetTotal(static_cast<double>(s.swap_in_pages));
        if (s.cpu_pressure_stall_seconds >= 0)
          stall.SetTotal(s.cpu_pressure_stall_seconds);
      });
}

}  // namespace redline::telemetry
