#include "model/arch/repack.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

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
    for (kernels::WeightView* m :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      out.push_back(m);
    }
  }
  out.push_back(&w->output);
  return out;
}

}  // namespace

Status RepackWeights(ModelWeights* weights, ThreadPool& pool, bool lock,
                     const OnPackedFn& on_packed) {
  std::vector<kernels::WeightView*> todo;
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (kernels::WeightView* m : ProductMatrices(weights)) {
    if (m->packed != nullptr || !kernels::PackedLayoutHelps(m->type)) continue;
    todo.push_back(m);
    offsets.push_back(total);
    total += RoundUp(kernels::PackedBytes(m->type, m->rows, m->cols), kAlign);
  }
  if (todo.empty()) return Status::Ok();

  // Anonymous pages rather than the heap: huge pages where the kernel
  // allows (fewer TLB misses while a decode step streams every matrix), and
  // the memory goes back to the OS with the model.
  void* mem = mmap(nullptr, static_cast<size_t>(total), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    return Status::ResourceExhausted(
        "cannot allocate " + std::to_string(total) +
        " bytes for repacked weights: " + std::strerror(errno));
  }
  madvise(mem, static_cast<size_t>(total), MADV_HUGEPAGE);
  const auto size = static_cast<size_t>(total);
  std::shared_ptr<const uint8_t> storage(
      static_cast<const uint8_t*>(mem),
      [size](const uint8_t* p) { munmap(const_cast<uint8_t*>(p), size); });
  auto* base = static_cast<uint8_t*>(mem);

  int64_t done = 0;
  for (size_t i = 0; i < todo.size(); ++i) {
    const kernels::WeightView& m = *todo[i];
    uint8_t* dst = base + offsets[i];
    pool.ParallelFor(kernels::PackedPanels(m.rows), 1,
                     [&](int64_t p0, int64_t p1, int) {
                       kernels::PackWeights(m, p0, p1, dst);
                     });
    done += RoundUp(kernels::PackedBytes(m.type, m.rows, m.cols), kAlign);
    if (on_packed)
      on_packed(m, static_cast<double>(done) / static_cast<double>(total));
  }
  // Read-only from here on, as the file's pages are.
  mprotect(mem, size, PROT_READ);
  if (lock && mlock(mem, size) != 0) {
    return Status::ResourceExhausted(
        std::string("mlock of repacked weights failed: ") +
        std::strerror(errno) + " (raise ulimit -l, or use --no-repack)");
  }
  for (size_t i = 0; i < todo.size(); ++i) todo[i]->packed = base + offsets[i];
  weights->packed_storage = std::move(storage);
  weights->packed_bytes = total;
  return Status::Ok();
}

}  // namespace redline::model
