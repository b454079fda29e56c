#include "gateway/metrics_scraper.h"

#include <string>
#include <utility>

#include "base/logging.h"

namespace redline::gateway {
namespace {
constexpr int64_t kNsPerMs = 1'000'000;
}  // namespace

class MetricsScraper::Target final : public CallSink {
 public:
  Target(http::EventLoop& loop, Pool* pool, Upstream* up)
      : pool_(pool), up_(up), timer_(loop) {}
  ~Target() override {
    timer_.Cancel();
    if (busy_) up_->transport->Cancel(call_);
  }

  void Tick() {
    Scrape();
    timer_.ExpireAfter(up_->scrape_interval_ms * kNsPerMs, [this] { Tick(); });
  }

  void OnCallHeaders(const http::ResponseHead& head, int64_t) override {
    status_ = head.status;
  }
  void OnCallBody(std::string_view data, int64_t) override {
    if (body_.size() + data.size() > kMaxScrapeBytes) {
      // The sink is not called again after Cancel.
      up_->transport->Cancel(call_);
      Failed(ScrapeError::kTooLarge,
             fmt::format("answer over {} bytes", kMaxScrapeBytes));
      return;
    }
    body_.append(data.data(), data.size());
  }
  void OnCallComplete(const http::TransportResult& r, int64_t t_ns) override {
    if (r.error != http::TransportError::kNone) {
      Failed(ScrapeError::kTransport,
             std::string(http::TransportErrorName(r.error)));
      return;
    }
    if (status_ != 200) {
      Failed(ScrapeError::kStatus, fmt::format("HTTP {}", status_));
      return;
    }
    auto report = ParseLoadReport(body_);
    if (!report.ok()) {
      Failed(ScrapeError::kNoLoadSeries, report.status().message());
      return;
    }
    busy_ = false;
    body_.clear();
    up_->scraped = *report;
    up_->scraped_ns = t_ns;
    UpstreamMetrics& m = up_->metrics;
    m.scraped_running->Set(report->running);
    m.scraped_waiting->Set(report->waiting);
    m.scraped_kv->Set(report->kv_usage);
    m.scrape_age->Set(0);
    if (failing_) {
      failing_ = false;
      RL_LOG(kInfo, "gateway: pool {}: upstream {}: {} scraped again",
             pool_->name(), up_->spec.name, pool_->spec().scrape.path);
    }
  }

 private:
  void Scrape() {
    if (busy_) return;
    busy_ = true;
    status_ = 0;
    body_.clear();
    http::ClientRequest r;
    r.method = "GET";
    r.target = up_->root + pool_->spec().scrape.path;
    r.total_timeout_ms = pool_->spec().scrape.timeout_ms;
    r.headers.push_back({"Accept", "text/plain"});
    if (!up_->spec.api_key.empty())
      r.headers.push_back({"Authorization", "Bearer " + up_->spec.api_key});
    call_ = up_->transport->Start(std::move(r), this);
  }

  void Failed(ScrapeError why, const std::string& detail) {
    busy_ = false;
    body_.clear();
    up_->metrics.scrape_errors[static_cast<int>(why)]->Increment();
    if (!failing_) {
      failing_ = true;
      RL_LOG(kWarning,
             "gateway: pool {}: upstream {}: scraping {} failed ({}: {}); its "
             "data goes stale after {} intervals and then counts as busy",
             pool_->name(), up_->spec.name, pool_->spec().scrape.path,
             ScrapeErrorName(why), detail.substr(0, 200),
             pool_->spec().scrape.stale_intervals);
    }
  }

  Pool* pool_;
  Upstream* up_;
  http::Timer timer_;
  UpstreamTransport::CallId call_ = 0;
  bool busy_ = false;
  bool failing_ = false;
  int status_ = 0;
  std::string body_;
};

MetricsScraper::MetricsScraper(http::EventLoop& loop, std::vector<Pool*> pools)
    : loop_(loop) {
  for (Pool* p : pools)
    for (auto& u : p->upstreams())
      if (u->scrape_interval_ms > 0)
        targets_.push_back(std::make_unique<Target>(loop_, p, u.get()));
}

MetricsScraper::~MetricsScraper() = default;

void MetricsScraper::Start() {
  for (auto& t : targets_) t->Tick();
}

}  // namespace redline::gateway
