#include "base/memory_bandwidth.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "base/huge_pages.h"

namespace redline {
namespace {

constexpr int64_t kWordsPerLine = 8;     // 64-byte cache lines
constexpr int64_t kPrefetchWords = 256;  // 2 KiB ahead, as the kernels

// n doubles in anonymous memory in whole huge pages, as repacked weights
// are (model/arch/repack.cc): the probe should measure what the weight
// streams can get, not what TLB misses leave of it.
class PageArray {
 public:
  explicit PageArray(int64_t n)
      : bytes_(static_cast<size_t>(HugePagesOf(std::max<int64_t>(n * 8, 1)))),
        data_(static_cast<double*>(MapHugePages(bytes_))) {
    if (data_ == nullptr) {
      data_ = new double[static_cast<size_t>(n)];
      heap_ = true;
    }
  }
  ~PageArray() {
    if (heap_) {
      delete[] data_;
    } else {
      UnmapHugePages(data_, bytes_);
    }
  }
  PageArray(const PageArray&) = delete;
  PageArray& operator=(const PageArray&) = delete;

  double& operator[](int64_t i) const { return data_[i]; }
  double* get() const { return data_; }

 private:
  size_t bytes_;
  double* data_;
  bool heap_ = false;
};

template <typename Fn>
double TimeGbps(ThreadPool& pool, int64_t n, double bytes, int repeats,
                Fn&& body) {
  std::vector<double> rates;
  for (int r = 0; r < repeats + 1; ++r) {
    const auto start = std::chrono::steady_clock::now();
    pool.ParallelFor(
        n, 4096, [&](int64_t b, int64_t e, int thread) { body(b, e, thread); });
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (r > 0) rates.push_back(bytes / s / 1e9);  // first pass only warms up
  }
  // The best pass, as STREAM reports: the roofline's ceiling should be what
  // the memory can do, not a typical moment of a drifting host.
  return rates.empty() ? 0.0 : *std::max_element(rates.begin(), rates.end());
}

}  // namespace

int64_t StreamArrayBytes() {
  constexpr int64_t kMinBytes = int64_t{256} << 20;
  constexpr int64_t kUnknownCacheBytes = int64_t{32} << 20;
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const int64_t cache = l3 > 0 ? l3 : l2 > 0 ? l2 : kUnknownCacheBytes;
  return std::max(kMinBytes, 4 * cache);
}

double BandwidthResult::best_gbps() const {
  return std::max({read_gbps, triad_gbps, copy_gbps});
}

BandwidthResult MeasureMemoryBandwidth(ThreadPool& pool,
                                       int64_t bytes_per_array, int repeats) {
  const int64_t n = bytes_per_array / 8;
  const PageArray a(n), b(n), c(n);
  pool.ParallelFor(n, 4096, [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo; i < hi; ++i) {
      a[i] = 1.0;
      b[i] = 2.0;
      c[i] = 0.5;
    }
  });
  BandwidthResult r;
  // One sink per thread, a cache line apart: chunks of one thread run one
  // after another, so only that thread writes its sink.
  constexpr int64_t kSinkStride = 8;
  std::vector<uint64_t> sinks(pool.num_threads() * kSinkStride, 0);
  const uint64_t* words = reinterpret_cast<const uint64_t*>(b.get());
  r.read_gbps = TimeGbps(
      pool, n, 8.0 * n, repeats, [&](int64_t lo, int64_t hi, int thread) {
        // XOR reduction vectorises without -ffast-math.
        uint64_t acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
        int64_t i = lo;
        for (; i + 4 <= hi; i += 4) {
          // Software prefetch, as the decode kernels do: the hardware
          // prefetchers alone leave bandwidth unused on this kind of host.
          if (i % kWordsPerLine == 0)
            __builtin_prefetch(words + i + kPrefetchWords);
          acc0 ^= words[i];
          acc1 ^= words[i + 1];
          acc2 ^= words[i + 2];
          acc3 ^= words[i + 3];
        }
        for (; i < hi; ++i) acc0 ^= words[i];
        sinks[thread * kSinkStride] ^= acc0 ^ acc1 ^ acc2 ^ acc3;
      });
  // Four interleaved streams per chunk, no software prefetch: on some
  // hosts (AMD Zen 5 here) the hardware prefetchers fetch more in parallel
  // for several streams than software prefetch gets from one (this probe:
  // 52.9 GB/s one stream, 61.6-62.5 four; 70-78 for streams hundreds of
  // MiB apart), and the ceiling should be what the memory can do.
  constexpr int64_t kStreams = 4;
  const double streams_gbps = TimeGbps(
      pool, n, 8.0 * n, repeats, [&](int64_t lo, int64_t hi, int thread) {
        const int64_t len =
            (hi - lo) / kStreams / kWordsPerLine * kWordsPerLine;
        uint64_t acc[kStreams] = {};
        for (int64_t i = 0; i < len; i += kWordsPerLine) {
          for (int64_t s = 0; s < kStreams; ++s) {
            const uint64_t* p = words + lo + s * len + i;
            acc[s] ^= p[0] ^ p[1] ^ p[2] ^ p[3] ^ p[4] ^ p[5] ^ p[6] ^ p[7];
          }
        }
        // The words the streams left out (fewer than kStreams lines).
        for (int64_t i = lo + kStreams * len; i < hi; ++i) acc[0] ^= words[i];
        sinks[thread * kSinkStride] ^= acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
      });
  r.read_gbps = std::max(r.read_gbps, streams_gbps);
  const double s = 3.0;
  r.triad_gbps =
      TimeGbps(pool, n, 24.0 * n, repeats, [&](int64_t lo, int64_t hi, int) {
        for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
      });
  r.copy_gbps =
      TimeGbps(pool, n, 16.0 * n, repeats, [&](int64_t lo, int64_t hi, int) {
        for (int64_t i = lo; i < hi; ++i) c[i] = a[i];
      });
  // Keep the reductions observable so they are not optimised away.
  volatile uint64_t keep = 0;
  for (uint64_t v : sinks) keep = keep ^ v;
  return r;
}

}  // namespace redline
