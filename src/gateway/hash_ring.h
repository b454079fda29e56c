// ConsistentHashRing: upstreams placed on a 64-bit ring at many virtual
// points each (in proportion to their weight), so a key maps to the first
// point clockwise from its hash, and adding or removing one upstream moves
// only the keys that upstream owned (about 1/N of them).
//
// Walk() visits the distinct upstreams in ring order from a key, which is
// what bounded-load placement needs: the first one that is eligible and not
// over its load bound wins.
//
// Thread-safety: immutable after Build(); thread-compatible. Cost: Build is
// O(points log points); Walk is O(log points) plus one step per point
// visited (at most every point when nothing is accepted).
#ifndef REDLINE_GATEWAY_HASH_RING_H_
#define REDLINE_GATEWAY_HASH_RING_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace redline::gateway {

class ConsistentHashRing {
 public:
  struct Node {
    std::string name;  // the upstream's name: its points derive from it
    double weight = 1;
  };

  // `points_per_weight` virtual points per unit of weight (at least one
  // point per node). Node i of `nodes` is reported as index i.
  void Build(const std::vector<Node>& nodes, int points_per_weight);

  // The first node clockwise from `key` for which accept(index) is true,
  // visiting each node once; nullopt when none is accepted.
  template <typename Accept>
  std::optional<size_t> Walk(uint64_t key, Accept&& accept) const;

  size_t points() const { return ring_.size(); }
  size_t nodes() const { return num_nodes_; }

 private:
  struct Point {
    uint64_t hash;
    uint32_t node;
    bool operator<(const Point& o) const {
      return hash != o.hash ? hash < o.hash : node < o.node;
    }
  };
  std::vector<Point> ring_;  // sorted by hash
  size_t num_nodes_ = 0;
};

template <typename Accept>
std::optional<size_t> ConsistentHashRing::Walk(uint64_t key,
                                               Accept&& accept) const {
  if (ring_.empty()) return std::nullopt;
  auto it = std::lower_bound(ring_.begin(), ring_.end(), Point{key, 0});
  size_t start = static_cast<size_t>(it - ring_.begin()) % ring_.size();
  // Nodes already refused: a small bitmap (nodes are few).
  std::vector<bool> seen(num_nodes_, false);
  size_t refused = 0;
  for (size_t step = 0; step < ring_.size() && refused < num_nodes_; ++step) {
    const uint32_t node = ring_[(start + step) % ring_.size()].node;
    if (seen[node]) continue;
    seen[node] = true;
    if (accept(static_cast<size_t>(node))) return node;
    ++refused;
  }
  return std::nullopt;
}

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_HASH_RING_H_
