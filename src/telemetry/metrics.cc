#include "telemetry/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace redline::telemetry {
namespace {

bool ValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

bool ValidLabelName(std::string_view name) {
  if (name.empty() || name == "le" || name.starts_with("__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

// Text-format escaping: HELP escapes \ and newline; label values also ".
std::string Escape(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

Histogram::Histogram(std::span<const double> upper_bounds)
    : upper_bounds_(upper_bounds),
      counts_(new std::atomic<uint64_t>[upper_bounds.size() + 1]) {
  for (size_t i = 0; i <= upper_bounds_.size(); ++i)
    counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  // First bound >= value: `le` is inclusive.
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) -
      upper_bounds_.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Collect() const {
  Snapshot s;
  s.cumulative.resize(upper_bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type,
                       std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {}

void FamilyBase::CheckLabelCount(size_t n) const {
  RL_CHECK(n == label_names_.size())
      << name_ << ": " << n << " label values for " << label_names_.size()
      << " label names";
}

std::string FamilyBase::LabelText(const std::vector<std::string>& values,
                                  std::string_view extra) const {
  if (values.empty() && extra.empty()) return {};
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += label_names_[i];
    out += "=\"";
    out += Escape(values[i], /*quote=*/true);
    out += '"';
  }
  if (!extra.empty()) {
    if (!values.empty()) out += ',';
    out += extra;
  }
  out += '}';
  return out;
}

void Registry::CheckNewName(const std::string& name,
                            const std::vector<std::string>& label_names) const {
  RL_CHECK(ValidMetricName(name)) << "invalid metric name '" << name << "'";
  for (const std::string& l : label_names)
    RL_CHECK(ValidLabelName(l)) << name << ": invalid label name '" << l << "'";
  for (const auto& f : families_)
    RL_CHECK(f->name() != name) << "metric '" << name << "' registered twice";
}

CounterFamily& Registry::AddCounter(std::string name, std::string help,
                                    std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNewName(name, label_names);
  auto f = std::make_unique<CounterFamily>(std::move(name), std::move(help),
                                           MetricType::kCounter,
                                           std::move(label_names));
  CounterFamily& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

GaugeFamily& Registry::AddGauge(std::string name, std::string help,
                                std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNewName(name, label_names);
  auto f =
      std::make_unique<GaugeFamily>(std::move(name), std::move(help),
                                    MetricType::kGauge, std::move(label_names));
  GaugeFamily& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

HistogramFamily& Registry::AddHistogram(std::string name, std::string help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> upper_bounds) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNewName(name, label_names);
  RL_CHECK(!upper_bounds.empty()) << name << ": a histogram needs buckets";
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    RL_CHECK(std::isfinite(upper_bounds[i]))
        << name << ": bucket bounds must be finite";
    RL_CHECK(i == 0 || upper_bounds[i] > upper_bounds[i - 1])
        << name << ": bucket bounds must increase";
  }
  auto f = std::make_unique<HistogramFamily>(
      std::move(name), std::move(help), MetricType::kHistogram,
      std::move(label_names), std::move(upper_bounds));
  HistogramFamily& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

void Registry::AddCollector(std::function<void()> refresh) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(refresh));
}

std::string Registry::RenderText() const {
  std::vector<std::function<void()>> collectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    collectors = collectors_;
  }
  // Collectors run without the registry lock: they may create children.
  for (const auto& c : collectors) c();
  std::string out;
  out.reserve(16 * 1024);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& f : families_) {
    out +=
        "# HELP " + f->name() + " " + Escape(f->help(), /*quote=*/false) + "\n";
    out +=
        "# TYPE " + f->name() + " " + std::string(TypeName(f->type())) + "\n";
    f->Render(&out);
  }
  return out;
}

}  // namespace redline::telemetry
