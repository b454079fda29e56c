#include "model/arch/repack.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "kernels/packed.h"

namespace redline::model {
namespace {

// Each copy starts on its own page (and so on a 64-byte line).
constexpr int64_t kAlign = 4096;

int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// The matrices products read, once each (a tied output is token_embd, which
// products read only as `output`).
std::vector<kernels::WeightView*> ProductMatrices(ModelWeights* w) {
  std::vector<kernels::WeightView*> out;
  for (LayerWeights& l : w->layers) {
    for (kernels::WeightView* m : l.Matrices()) {
      out.push_back(m);
    }
  }
  out.push_back(&w->output);
  return out;
}

struct Copy {
  kernels::WeightView* matrix;
  bool packed;     // panel layout (else the file's rows)
  int64_t offset;  // in the allocation
  int64_t bytes;
};

}  // namespace

Status RepackWeights(ModelWeights* weights, ThreadPool& pool, bool lock,
                     const OnCopiedFn& on_copied) {
  std::vector<Copy> copies;
  int64_t total = 0;
  for (kernels::WeightView* m : ProductMatrices(weights)) {
    if (m->packed != nullptr) continue;  // already repacked
    const bool packed = kernels::PackedLayoutHelps(m->type);
    const int64_t bytes = packed
                              ? kernels::PackedBytes(m->type, m->rows, m->cols)
                              : m->rows * kernels::RowBytes(m->type, m->cols);
    copies.push_back({m, packed, total, bytes});
    total += RoundUp(bytes, kAlign);
  }
  if (copies.empty()) return Status::Ok();

  // Anonymous pages rather than the heap: huge pages where the kernel
  // allows (whole ones, aligned), and the memory goes back to the OS with
  // the model.
  const auto size = static_cast<size_t>(HugePagesOf(total));
  void* mem = MapHugePages(size);
  if (mem == nullptr) {
    return Status::ResourceExhausted(
        "cannot allocate " + std::to_string(total) +
        " bytes for repacked weights: " + std::strerror(errno) +
        " (--no-repack reads the file's pages instead)");
  }
  std::shared_ptr<const uint8_t> storage(
      static_cast<const uint8_t*>(mem), [size](const uint8_t* p) {
        UnmapHugePages(const_cast<uint8_t*>(p), size);
      });
  auto* base = static_cast<uint8_t*>(mem);

  int64_t done = 0;
  for (const Copy& c : copies) {
    const kernels::WeightView& m = *c.matrix;
    uint8_t* dst = base + c.offset;
    const int64_t row_bytes = kernels::RowBytes(m.type, m.cols);
    // Units of kPackRows rows (one panel) for both kinds of copy.
    pool.ParallelFor(
        kernels::PackedPanels(m.rows), 1, [&](int64_t p0, int64_t p1, int) {
          if (c.packed) {
            kernels::PackWeights(m, p0, p1, dst);
            return;
          }
          const int64_t r0 = p0 * kernels::kPackRows;
          const int64_t r1 = std::min(m.rows, p1 * kernels::kPackRows);
          std::memcpy(dst + r0 * row_bytes, m.Row(r0),
                      static_cast<size_t>((r1 - r0) * row_bytes));
        });
    done += RoundUp(c.bytes, kAlign);
    if (on_copied)
      on_copied(m, static_cast<double>(done) / static_cast<double>(total));
  }
  // Read-only from here on, as the file's pages are.
  mprotect(mem, size, PROT_READ);
  if (lock && mlock(mem, size) != 0) {
    return Status::ResourceExhausted(
        std::string("mlock of repacked weights failed: ") +
        std::strerror(errno) + " (raise ulimit -l, or use --no-repack)");
  }
  for (const Copy& c : copies) {
    if (c.packed) {
      c.matrix->packed = base + c.offset;
    } else {
      c.matrix->data = base + c.offset;
    }
  }
  weights->packed_storage = std::move(storage);
  weights->packed_bytes = total;
  return Status::Ok();
}

}  // namespace redline::model
