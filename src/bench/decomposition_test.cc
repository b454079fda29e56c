// The E2E decomposition and the traced requests on hand-made records.
#include "bench/decomposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bench/metrics.h"

namespace redline::bench {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'000 * kMs;

// A streamed request scheduled at `sched_ms` (from kT0), sent `dispatch_ms`
// later, with content chunks from first_ms to e2e_ms after the send.
RequestRecord Streamed(uint64_t id, double sched_ms, double dispatch_ms,
                       double first_ms, double e2e_ms) {
  RequestRecord r;
  r.id = id;
  r.phase = Phase::kMeasure;
  r.streamed = true;
  r.t_sched_ns = kT0 + static_cast<int64_t>(sched_ms * kMs);
  r.t_send_ns = r.t_sched_ns + static_cast<int64_t>(dispatch_ms * kMs);
  r.t_first_ns = r.t_send_ns + static_cast<int64_t>(first_ms * kMs);
  r.t_first_output_ns = r.t_first_ns;
  r.t_last_ns = r.t_send_ns + static_cast<int64_t>(e2e_ms * kMs);
  r.t_end_ns = r.t_last_ns + kMs;
  r.chunk_ns = {r.t_first_ns, r.t_last_ns};
  r.output_tokens = 2;
  r.http_status = 200;
  r.trace_id = std::string(31, '0') + std::to_string(id % 10);
  return r;
}

void Timing(RequestRecord& r, double queue, double prefill, double decode,
            double gateway = -1) {
  r.server_queue_ms = queue;
  r.server_prefill_ms = prefill;
  r.server_decode_ms = decode;
  r.server_e2e_ms = queue + prefill + decode;
  r.gateway_ms = gateway;
}

double Part(const RequestDecomposition& d, Part p) {
  return d.part_ms[static_cast<int>(p)];
}

TEST(DecompositionTest, PartsAddUpToTheClientsScheduleRelativeE2e) {
  RequestRecord r = Streamed(1, 0, 2.5, 40, 100);
  Timing(r, 10, 25, 55, 3);
  auto d = Decompose(r);
  ASSERT_TRUE(d);
  EXPECT_DOUBLE_EQ(Part(*d, Part::kClient), 2.5);
  EXPECT_DOUBLE_EQ(Part(*d, Part::kGateway), 3);
  EXPECT_DOUBLE_EQ(Part(*d, Part::kQueue), 10);
  EXPECT_DOUBLE_EQ(Part(*d, Part::kPrefill), 25);
  EXPECT_DOUBLE_EQ(Part(*d, Part::kDecode), 55);
  EXPECT_NEAR(Part(*d, Part::kNetwork), 100 - 3 - 10 - 25 - 55, 1e-9);
  double sum = 0;
  for (double v : d->part_ms) sum += v;
  // The bench's own e2e_sched (metrics.h), in microseconds.
  const RequestLatencies lat = ComputeLatencies(r);
  ASSERT_TRUE(lat.e2e_sched_us && lat.e2e_us);
  EXPECT_NEAR(sum * 1000, static_cast<double>(*lat.e2e_sched_us), 1);
  EXPECT_NEAR(d->e2e_ms * 1000, static_cast<double>(*lat.e2e_us), 1);
  EXPECT_NEAR(d->total_ms, sum, 1e-9);
}

TEST(DecompositionTest, NonStreamingEndsAtTheLastByte) {
  RequestRecord r = Streamed(2, 0, 0, 0, 0);
  r.streamed = false;
  r.chunk_ns.clear();
  r.t_first_ns = r.t_last_ns = 0;
  r.t_end_ns = r.t_send_ns + 80 * kMs;
  Timing(r, 0, 20, 50);
  auto d = Decompose(r);
  ASSERT_TRUE(d);
  EXPECT_NEAR(d->e2e_ms, 80, 1e-9);
  EXPECT_NEAR(Part(*d, Part::kNetwork), 10, 1e-9);
  // No gateway;dur: the gateway part is 0, not -1.
  EXPECT_EQ(Part(*d, Part::kGateway), 0);
}

TEST(DecompositionTest, OnlySuccessfulRequestsWithTimingAreDecomposed) {
  RequestRecord no_timing = Streamed(3, 0, 0, 10, 20);
  EXPECT_FALSE(Decompose(no_timing));
  RequestRecord failed = Streamed(4, 0, 0, 10, 20);
  Timing(failed, 0, 5, 5);
  failed.error = ErrorClass::kHttp5xx;
  EXPECT_FALSE(Decompose(failed));
  RequestRecord half = Streamed(5, 0, 0, 10, 20);
  half.server_prefill_ms = 5;  // no decode: not enough to split
  EXPECT_FALSE(Decompose(half));
}

// 200 requests: the slowest 2 % spent their extra time queueing, the rest
// is the same prefill + decode. The p99 row must say "queue", p50 "decode".
std::vector<RequestRecord> TailFromQueue() {
  std::vector<RequestRecord> out;
  for (uint64_t i = 0; i < 200; ++i) {
    const bool tail = i >= 196;
    const double queue = tail ? 400 : 1;
    RequestRecord r = Streamed(i, static_cast<double>(i) * 20, 0.1, queue + 20,
                               queue + 20 + 60 + 0.5);
    Timing(r, queue, 20, 60);
    out.push_back(r);
  }
  return out;
}

TEST(DecompositionTest, PercentileRowsShowWhichPartMakesTheTail) {
  const std::vector<RequestRecord> rs = TailFromQueue();
  const Decomposition d = BuildDecomposition(rs, kT0, 1);
  EXPECT_EQ(d.ok_requests, 200);
  EXPECT_EQ(d.decomposed, 200);
  ASSERT_EQ(d.at.size(), 3u);
  EXPECT_EQ(d.at[0].percentile, 50);
  EXPECT_EQ(d.at[0].dominant, Part::kDecode);
  EXPECT_EQ(d.at[2].percentile, 99);
  EXPECT_EQ(d.at[2].dominant, Part::kQueue);
  EXPECT_GT(d.at[2].Share(Part::kQueue), 0.7);
  // 0.5 % of 200 on each side: 3 requests around the rank.
  EXPECT_EQ(d.at[2].requests, 3);
  EXPECT_LT(d.max_sum_error_ms, 1e-6);
  // Every percentile row adds up to its total.
  for (const DecompositionAt& at : d.at) {
    double sum = 0;
    for (double v : at.part_ms) sum += v;
    EXPECT_NEAR(sum, at.total_ms, 1e-6);
  }
}

TEST(DecompositionTest, RowsRankByTheTotalSoALateClientShows) {
  // The same E2E for every request; four were sent 300 ms late. Ranked by
  // E2E the p99 row would be any request; ranked by the total it is them.
  std::vector<RequestRecord> rs;
  for (uint64_t i = 0; i < 200; ++i) {
    const double late = i % 50 == 7 ? 300 : 0.05;
    RequestRecord r =
        Streamed(i, static_cast<double>(i) * 20, late, 10, 20 + 0.001 * i);
    Timing(r, 0, 9.5, 10);
    rs.push_back(r);
  }
  const Decomposition d = BuildDecomposition(rs, kT0, 1);
  ASSERT_EQ(d.at.size(), 3u);
  EXPECT_EQ(d.at[0].dominant, Part::kDecode);
  EXPECT_EQ(d.at[2].dominant, Part::kClient);
  EXPECT_GT(d.at[2].Share(Part::kClient), 0.9);
  EXPECT_NEAR(d.at[2].rank_total_ms, 320, 0.5);
}

TEST(DecompositionTest, SeriesBucketsByFinishTime) {
  const std::vector<RequestRecord> rs = TailFromQueue();
  const Decomposition d = BuildDecomposition(rs, kT0, 1);
  const DecompositionSeries& s = d.series;
  ASSERT_GE(s.t_s.size(), 4u);
  int64_t n = 0;
  for (int64_t c : s.requests) n += c;
  EXPECT_EQ(n, 200);
  // Bucket 0: requests 0..49 finish in the first second, decode 60 ms each.
  EXPECT_NEAR(s.part_ms[static_cast<int>(Part::kDecode)][0], 60, 1e-9);
  // The last bucket holds the queued tail.
  const size_t last = s.t_s.size() - 1;
  EXPECT_GT(s.part_ms[static_cast<int>(Part::kQueue)][last], 100);
}

TEST(DecompositionTest, NoTimingMeansNoRows) {
  std::vector<RequestRecord> rs = {Streamed(1, 0, 0, 5, 10),
                                   Streamed(2, 1, 0, 5, 10)};
  const Decomposition d = BuildDecomposition(rs, kT0, 1);
  EXPECT_EQ(d.ok_requests, 2);
  EXPECT_EQ(d.decomposed, 0);
  EXPECT_TRUE(d.at.empty());
}

TEST(TraceIdsTest, SlowestFirstAndThePercentileRequests) {
  std::vector<RequestRecord> rs;
  for (uint64_t i = 0; i < 100; ++i)
    rs.push_back(Streamed(i, static_cast<double>(i), 0, 1,
                          10 + static_cast<double>((i * 37) % 100)));
  RequestRecord failed = Streamed(100, 0, 0, 1, 5000);
  failed.error = ErrorClass::kTimeout;
  rs.push_back(failed);
  RequestRecord warm = Streamed(101, 0, 0, 1, 9000);
  warm.phase = Phase::kWarmup;
  rs.push_back(warm);
  const TraceIds t = BuildTraceIds(rs, kT0, 10);
  EXPECT_TRUE(t.sent);
  ASSERT_EQ(t.slowest.size(), 10u);
  for (size_t i = 1; i < t.slowest.size(); ++i)
    EXPECT_GE(t.slowest[i - 1].e2e_ms, t.slowest[i].e2e_ms);
  // Failed and warm-up requests are not among them.
  EXPECT_NEAR(t.slowest[0].e2e_ms, 109, 1e-6);
  EXPECT_EQ(t.slowest[0].label, "slowest 1");
  ASSERT_EQ(t.percentile.size(), 3u);
  EXPECT_EQ(t.percentile[2].label, "p99");
  // E2E values are 10..109 ms, one each: p99 is the 99th, 108 ms.
  EXPECT_NEAR(t.percentile[2].e2e_ms, 108, 1e-6);
  EXPECT_NEAR(t.percentile[0].e2e_ms, 59, 1e-6);
  EXPECT_EQ(t.percentile[2].trace_id, rs[t.percentile[2].request_id].trace_id);
  EXPECT_FALSE(t.percentile[2].trace_id.empty());
}

TEST(TraceIdsTest, NotSentWhenNoRequestCarriedOne) {
  RequestRecord r = Streamed(1, 0, 0, 1, 2);
  r.trace_id.clear();
  const std::vector<RequestRecord> rs = {r};
  const TraceIds t = BuildTraceIds(rs, kT0);
  EXPECT_FALSE(t.sent);
  ASSERT_EQ(t.percentile.size(), 3u);
  EXPECT_TRUE(t.percentile[0].trace_id.empty());
}

}  // namespace
}  // namespace redline::bench
