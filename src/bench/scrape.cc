#include "bench/scrape.h"

#include <cmath>

#include "bench/server_series.h"
#include "bench/units.h"
#include "http/url.h"

namespace redline::bench {

class Scraper::Handler final : public http::ResponseHandler {
 public:
  explicit Handler(Scraper* s) : scraper_(s) {}
  void Reset() {
    body_.clear();
    status_ = 0;
  }
  void OnHeaders(const http::ResponseHead& head, int64_t) override {
    status_ = head.status;
  }
  void OnBody(std::string_view data, int64_t) override {
    if (body_.size() < (8u << 20)) body_.append(data);
  }
  void OnComplete(const http::TransportResult& r, int64_t t_ns) override {
    scraper_->busy_ = false;
    if (r.error != http::TransportError::kNone || status_ != 200) {
      scraper_->failures_++;
      return;
    }
    scraper_->Ingest(body_, t_ns);
  }

 private:
  Scraper* scraper_;
  std::string body_;
  int status_ = 0;
};

Scraper::Scraper(std::string url, std::vector<std::string> filter,
                 size_t max_series)
    : url_(std::move(url)),
      filter_(std::move(filter)),
      max_series_(max_series) {
  if (filter_.empty()) {
    filter_ = {"cpu",      "memory", "resident", "queue", "waiting",
               "running",  "kv",     "cache",    "batch", "tokens",
               "requests", "swap",   "preempt"};
  }
  auto parsed = http::ParseUrl(url_);
  if (parsed.ok()) {
    origin_ = parsed->origin;
    target_ = parsed->target;
    url_ok_ = true;
  }
  handler_ = std::make_unique<Handler>(this);
}

Scraper::~Scraper() = default;

bool Scraper::Keep(std::string_view name) const {
  // Histogram buckets would flood the report; their _sum/_count stay.
  if (name.size() > 7 && name.substr(name.size() - 7) == "_bucket")
    return false;
  for (const auto& f : filter_) {
    if (name.find(f) != std::string_view::npos) return true;
  }
  return false;
}

void Scraper::Sample(http::Client& client, int64_t now_ns) {
  if (!url_ok_ || busy_) return;
  busy_ = true;
  handler_->Reset();
  http::ClientRequest req;
  req.method = "GET";
  req.target = target_;
  req.headers = {{"Accept", "text/plain"}};
  req.total_timeout_ms = 5000;
  client.Send(origin_, std::move(req), handler_.get());
  (void)now_ns;
}

void Scraper::Ingest(std::string_view body, int64_t t_ns) {
  samples_++;
  // Absolute; made relative in Series().
  const double t = static_cast<double>(t_ns) / 1e9;
  // This scrape's curated histograms, summed by `le`.
  std::map<std::string, std::map<double, double>> buckets;
  for (PromSample& s : ParsePrometheusText(body)) {
    if (std::string family = CuratedHistogramFamily(s.name); !family.empty()) {
      for (const auto& [k, v] : ParseLabels(s.labels)) {
        if (k != "le") continue;
        double le = INFINITY;
        if (v != "+Inf") {
          auto parsed = ParseNumber(v);
          if (!parsed.ok()) break;
          le = *parsed;
        }
        auto& fam = buckets[family];
        if (fam.size() < 256 || fam.count(le)) fam[le] += s.value;
        break;
      }
      continue;
    }
    const bool curated = IsCuratedSeries(s.name);
    if (!curated && !Keep(s.name)) continue;
    std::string key = s.name + "{" + s.labels + "}";
    auto it = series_.find(key);
    if (it == series_.end()) {
      if (curated ? curated_series_ >= max_series_
                  : series_.size() - curated_series_ >= max_series_)
        continue;
      if (curated) curated_series_++;
      ScrapeSeries ser;
      ser.name = s.name;
      ser.labels = s.labels;
      auto ends = [&](std::string_view suffix) {
        return ser.name.size() >= suffix.size() &&
               ser.name.compare(ser.name.size() - suffix.size(), suffix.size(),
                                suffix) == 0;
      };
      ser.counter = ends("_total") || ends("_count") || ends("_sum");
      it = series_.emplace(key, std::move(ser)).first;
    }
    it->second.t_s.push_back(t);
    it->second.value.push_back(s.value);
  }
  for (auto& [family, cumulative] : buckets) {
    ScrapeHistogram& h = histograms_[family];
    h.name = family;
    h.t_s.push_back(t);
    h.buckets.push_back(std::move(cumulative));
  }
}

std::vector<ScrapeHistogram> Scraper::Histograms(int64_t t0_ns) const {
  std::vector<ScrapeHistogram> out;
  const double t0 = static_cast<double>(t0_ns) / 1e9;
  for (const auto& [k, v] : histograms_) {
    out.push_back(v);
    for (double& t : out.back().t_s) t -= t0;
  }
  return out;
}

std::vector<ScrapeSeries> Scraper::Series(int64_t t0_ns) const {
  std::vector<ScrapeSeries> out;
  const double t0 = static_cast<double>(t0_ns) / 1e9;
  for (const auto& [k, v] : series_) {
    out.push_back(v);
    for (double& t : out.back().t_s) t -= t0;
  }
  return out;
}

}  // namespace redline::bench
