// STREAM-style memory bandwidth measurement, used as the denominator of the
// decode roofline share (bench-model).
#ifndef REDLINE_BASE_MEMORY_BANDWIDTH_H_
#define REDLINE_BASE_MEMORY_BANDWIDTH_H_

#include <cstdint>

#include "base/thread_pool.h"

namespace redline {

struct BandwidthResult {
  // Read-only sweep (what a decode step does with weights): the better of
  // one stream per chunk with software prefetch and four interleaved
  // streams per chunk without.
  double read_gbps = 0;
  // STREAM triad a = b + s*c, counted as 3 x 8 bytes/element.
  double triad_gbps = 0;
  double copy_gbps = 0;  // STREAM copy a = b, counted as 2 x 8 bytes/element
  // The best of the three: the roofline denominator (never flatters a share).
  double best_gbps() const;
};

// The array size STREAM's rule asks for: at least four times the
// last-level cache (sysconf; 32 MiB assumed where it is unknown) and never
// under 256 MiB. Smaller arrays measure the cache too: on a 32 MiB-L3 host,
// 48-64 MiB arrays read 55-76 GB/s where 96 MiB to 1 GiB read 42-62 in the
// same minutes, and a decode step, which sweeps hundreds of MiB per token,
// gets none of that help.
int64_t StreamArrayBytes();

// Runs each kernel `repeats` times over `bytes_per_array` (see
// StreamArrayBytes) on all threads of `pool` and keeps the best pass (as
// STREAM does). The arrays are anonymous memory advised for huge pages and
// the read sweep prefetches 2 KiB ahead, as repacked weights are stored and
// read, so the read figure is what a decode step's weight streams can reach
// (without both, this host measured ~25 % less than the decode kernels then
// got). Cost: allocates and fills 3 x bytes_per_array; ~repeats x 0.1 s
// with 256 MiB arrays.
BandwidthResult MeasureMemoryBandwidth(
    ThreadPool& pool, int64_t bytes_per_array = StreamArrayBytes(),
    int repeats = 5);

}  // namespace redline

#endif  // REDLINE_BASE_MEMORY_BANDWIDTH_H_
