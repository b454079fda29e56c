// Anonymous memory in whole transparent huge pages, for the large arrays
// that a decode step streams through (repacked weights, the KV cache) and
// the bandwidth probe that stands for them.
//
// Why one place: a huge page can only back an aligned 2 MiB range, so a
// mapping that starts or ends mid-page is backed by 4 KiB pages there, and
// on a VM each of their first touches cost ~25 us in the middle of a step
// (model/arch/kv_cache.cc has the figures). Thread-safe (no state).
#ifndef REDLINE_BASE_HUGE_PAGES_H_
#define REDLINE_BASE_HUGE_PAGES_H_

#include <cstddef>
#include <cstdint>

namespace redline {

// The x86-64 transparent huge page.
inline constexpr int64_t kHugePageBytes = int64_t{2} << 20;

// `bytes` rounded up to whole huge pages; 0 stays 0. Requires
// 0 <= bytes <= INT64_MAX - kHugePageBytes.
int64_t HugePagesOf(int64_t bytes);

// Maps `bytes` (a positive multiple of kHugePageBytes) of private anonymous
// memory starting on a huge-page boundary, advised for huge pages. Only
// address space until touched: pages are committed (zeroed) on first
// write. Returns nullptr when the OS refuses (errno says why). Cost: two or
// three system calls. Release with UnmapHugePages(p, bytes).
void* MapHugePages(size_t bytes);
void UnmapHugePages(void* p, size_t bytes);

}  // namespace redline

#endif  // REDLINE_BASE_HUGE_PAGES_H_
