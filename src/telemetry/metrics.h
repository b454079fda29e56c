// Metrics registry: counters, gauges and histograms with labels, rendered in
// the Prometheus text exposition format (version 0.0.4), as `GET /metrics`
// serves it.
//
//   telemetry::Registry registry;
//   auto& requests = registry.AddCounter("redline_request_success_total",
//                                        "Requests that finished",
//                                        {"model_name", "finished_reason"});
//   // Look the child up once and keep the reference.
//   telemetry::Counter& ok_stop = requests.Labels({"smollm2", "stop"});
//   ok_stop.Increment();
//   std::string text = registry.RenderText();
//
// Model: a family (one metric name, one type, fixed label names) holds one
// child per combination of label values. Children are created on first use
// and live as long as the registry, so callers look them up once (a map
// lookup under a mutex) and keep the reference; the hot path (Increment,
// Set, Observe) is then lock-free: a few relaxed atomic operations.
//
// Ownership: the Registry owns its families, families own their children.
// References stay valid until the Registry is destroyed.
//
// Thread-safety: everything is thread-safe. Registration (Add*) is meant for
// start-up; it checks names and aborts on a programming error (invalid or
// duplicate name, wrong number of label values) — these are bugs, not input.
// RenderText may run concurrently with updates: each value is read
// atomically, but a scrape is not a consistent snapshot across series (a
// histogram's _sum may lag its _count by a sample in flight), which
// Prometheus tolerates.
//
// Cost: Counter/Gauge updates are one atomic add or store; Histogram::Observe
// is a binary search over the bucket bounds plus two atomic adds. RenderText
// is O(series x buckets) and allocates the output string.
#ifndef REDLINE_TELEMETRY_METRICS_H_
#define REDLINE_TELEMETRY_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redline::telemetry {

enum class MetricType { kCounter, kGauge, kHistogram };

// A monotonically increasing value (requests, tokens, CPU seconds).
class Counter {
 public:
  // Adds `delta` (must be >= 0; negative deltas are ignored).
  void Increment(double delta = 1.0) {
    if (delta > 0) value_.fetch_add(delta, std::memory_order_relaxed);
  }
  // For mirrors of a total that another component keeps (e.g. the engine's
  // prefix-cache counters, the kernel's CPU time), refreshed by a collector
  // just before a scrape. The caller keeps it monotonic.
  void SetTotal(double total) {
    value_.store(total, std::memory_order_relaxed);
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down (queue length, KV usage, load progress).
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A distribution over fixed buckets. `upper_bounds` are the inclusive upper
// edges (Prometheus `le`), strictly increasing; the +Inf bucket is implicit.
class Histogram {
 public:
  // `upper_bounds` must outlive the histogram (the family owns it).
  explicit Histogram(std::span<const double> upper_bounds);

  // Records one sample. NaN is dropped.
  void Observe(double value);

  struct Snapshot {
    // Cumulative bucket counts, upper_bounds.size() + 1 of them; the last
    // (+Inf) equals count.
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Collect() const;

 private:
  std::span<const double> upper_bounds_;
  // One count per bucket (not cumulative), upper_bounds_.size() + 1.
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0.0};
};

// Shared part of every family: name, help, type, label names, rendering.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type,
             std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  // Appends "# HELP", "# TYPE" and one line per series (or bucket).
  virtual void Render(std::string* out) const = 0;

 protected:
  // Canonical "{a="x",b="y"}" for a label-value tuple ("" when no labels),
  // values escaped as the text format requires. `extra` (e.g. le="0.1") is
  // appended inside the braces when non-empty.
  std::string LabelText(const std::vector<std::string>& values,
                        std::string_view extra = {}) const;
  void CheckLabelCount(size_t n) const;

  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
};

// One metric name with its children, keyed by label values.
template <typename Metric>
class Family final : public FamilyBase {
 public:
  using FamilyBase::FamilyBase;
  Family(std::string name, std::string help, MetricType type,
         std::vector<std::string> label_names, std::vector<double> upper_bounds)
      : FamilyBase(std::move(name), std::move(help), type,
                   std::move(label_names)),
        upper_bounds_(std::move(upper_bounds)) {}

  // The child for these label values (as many as the family has label
  // names, in that order), created on first use. Keep the reference.
  Metric& Labels(std::initializer_list<std::string_view> values);
  Metric& Labels(const std::vector<std::string>& values);

  void Render(std::string* out) const override;

 private:
  mutable std::mutex mu_;
  // Guarded by mu_.
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> children_;
  // Histograms only.
  const std::vector<double> upper_bounds_{};
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Names must match [a-zA-Z_:][a-zA-Z0-9_:]* and be unique; label names
  // [a-zA-Z_][a-zA-Z0-9_]* and not "le". Counter names should end in
  // "_total" (Prometheus convention; promtool checks it).
  CounterFamily& AddCounter(std::string name, std::string help,
                            std::vector<std::string> label_names = {});
  GaugeFamily& AddGauge(std::string name, std::string help,
                        std::vector<std::string> label_names = {});
  // `upper_bounds`: strictly increasing, finite.
  HistogramFamily& AddHistogram(std::string name, std::string help,
                                std::vector<std::string> label_names,
                                std::vector<double> upper_bounds);

  // `refresh` runs at the start of every RenderText (on the rendering
  // thread), to copy values kept elsewhere into gauges and counters.
  void AddCollector(std::function<void()> refresh);

  // The whole registry in Prometheus text format, families in registration
  // order.
  std::string RenderText() const;

 private:
  void CheckNewName(const std::string& name,
                    const std::vector<std::string>& label_names) const;

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_;  // guarded by mu_
  std::vector<std::function<void()>> collectors_;      // guarded by mu_
};

// Formats a sample value as the text format wants it: shortest round-trip
// decimal, "+Inf", "-Inf" or "NaN".
std::string FormatMetricValue(double value);

// ---- implementation ----

template <typename Metric>
Metric& Family<Metric>::Labels(std::initializer_list<std::string_view> values) {
  std::vector<std::string> key;
  key.reserve(values.size());
  for (std::string_view v : values) key.emplace_back(v);
  return Labels(key);
}

template <typename Metric>
Metric& Family<Metric>::Labels(const std::vector<std::string>& values) {
  CheckLabelCount(values.size());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(values);
  if (it != children_.end()) return *it->second;
  std::unique_ptr<Metric> child;
  if constexpr (std::is_same_v<Metric, Histogram>) {
    child = std::make_unique<Histogram>(upper_bounds_);
  } else {
    child = std::make_unique<Metric>();
  }
  Metric& ref = *child;
  children_.emplace(values, std::move(child));
  return ref;
}

template <typename Metric>
void Family<Metric>::Render(std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [labels, child] : children_) {
    if constexpr (std::is_same_v<Metric, Histogram>) {
      const Histogram::Snapshot s = child->Collect();
      for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
        const std::string le =
            "le=\"" +
            (i < upper_bounds_.size() ? FormatMetricValue(upper_bounds_[i])
                                      : std::string("+Inf")) +
            "\"";
        *out += name_ + "_bucket" + LabelText(labels, le) + " " +
                std::to_string(s.cumulative[i]) + "\n";
      }
      const std::string l = LabelText(labels);
      *out += name_ + "_sum" + l + " " + FormatMetricValue(s.sum) + "\n";
      *out += name_ + "_count" + l + " " + std::to_string(s.count) + "\n";
    } else {
      *out += name_ + LabelText(labels) + " " +
              FormatMetricValue(child->value()) + "\n";
    }
  }
}

}  // namespace redline::telemetry

#endif  // REDLINE_TELEMETRY_METRICS_H_
