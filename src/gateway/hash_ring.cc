#include "gateway/hash_ring.h"

#include <cmath>

#include "gateway/hash.h"

namespace redline::gateway {

void ConsistentHashRing::Build(const std::vector<Node>& nodes,
                               int points_per_weight) {
  ring_.clear();
  num_nodes_ = nodes.size();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int points = std::max(
        1, static_cast<int>(std::lround(nodes[i].weight * points_per_weight)));
    for (int p = 0; p < points; ++p) {
      // Points derive from the name, not the position in the config, so
      // reordering upstreams keeps every session where it was.
      const uint64_t h =
          Mix64(Fnv1a(std::to_string(p), Fnv1a("#", Fnv1a(nodes[i].name))));
      ring_.push_back({h, static_cast<uint32_t>(i)});
    }
  }
  std::sort(ring_.begin(), ring_.end());
}

}  // namespace redline::gateway
