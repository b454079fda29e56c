// Sizing the KV caches before they are allocated: a context or slot count
// that cannot fit in memory is refused with a message that names the bytes,
// instead of aborting in the allocator (std::bad_alloc) or, with memory
// overcommit, being killed later when the pages are touched.
//
// Thread-safety: free functions; ReadMemAvailableBytes reads a file.
#ifndef REDLINE_ENGINE_KV_MEMORY_H_
#define REDLINE_ENGINE_KV_MEMORY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"
#include "model/arch/kv_cache.h"
#include "model/arch/model_config.h"

namespace redline::engine {

// "512 B", "1.5 KiB", "22 GiB", "1.4 TiB" (binary units; one decimal below
// 10 of a unit).
std::string FormatBytes(int64_t bytes);

// MemAvailable from a /proc/meminfo-style file, in bytes (the kernel's
// estimate of memory available to new allocations without swapping);
// nullopt when the file or the line cannot be read. Cost: one small read.
std::optional<int64_t> ReadMemAvailableBytes(
    const std::string& meminfo_path = "/proc/meminfo");

// OK when `slots` KV caches of n_ctx positions (slots x
// model::KvCacheBytes) fit in `available_bytes`; nullopt skips the check.
// Otherwise ResourceExhausted, e.g. "the KV cache for 4 slots x 100000000
// tokens needs 1.4 TiB; this machine has 22 GiB available (MemAvailable);
// lower --ctx or --parallel" ("lower --ctx" alone for one slot); and
// InvalidArgument when the model's heads cannot be stored as `type`
// (model::CheckKvType), whether or not `available_bytes` is given.
Status CheckKvCacheFits(const model::ModelConfig& config, int64_t n_ctx,
                        int slots, model::KvType type,
                        std::optional<int64_t> available_bytes);

}  // namespace redline::engine

#endif  // REDLINE_ENGINE_KV_MEMORY_H_
