#include "base/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

#include "base/check.h"

namespace redline {

int64_t HugePagesOf(int64_t bytes) {
  RL_DCHECK(bytes >= 0 && bytes <= INT64_MAX - kHugePageBytes) << bytes;
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

void* MapHugePages(size_t bytes) {
  constexpr auto kPage = static_cast<size_t>(kHugePageBytes);
  RL_DCHECK(bytes > 0 && bytes % kPage == 0) << bytes;
  // One page more than asked, to have room to align: only address space.
  void* p = mmap(nullptr, bytes + kPage, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (base + kPage - 1) & ~(kPage - 1);
  if (start > base) munmap(p, start - base);
  const uintptr_t end = base + bytes + kPage;
  if (end > start + bytes) {
    munmap(reinterpret_cast<void*>(start + bytes), end - (start + bytes));
  }
  void* pages = reinterpret_cast<void*>(start);
  madvise(pages, bytes, MADV_HUGEPAGE);
  return pages;
}

void UnmapHugePages(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, bytes);
}

}  // namespace redline
