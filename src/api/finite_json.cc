#include "api/finite_json.h"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

namespace redline::api {
namespace {

namespace json = boost::json;

// One step of a path: a member name, or an array index.
struct Step {
  bool index;
  std::string text;
};

// True when `v` holds a non-finite number (or nests deeper than
// kMaxFiniteCheckDepth). The path is built only then, on the way back up:
// *steps gets the member names and indices from the offending value
// outwards, so a clean document costs no allocation.
bool Find(const json::value& v, int depth, std::vector<Step>* steps) {
  if (v.is_double()) return !std::isfinite(v.get_double());
  if (!v.is_array() && !v.is_object()) return false;
  // Deeper than any document the parser hands out: refuse rather than
  // recurse without bound.
  if (depth >= kMaxFiniteCheckDepth) return true;
  if (const json::array* a = v.if_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      if (Find((*a)[i], depth + 1, steps)) {
        steps->push_back({true, fmt::format("[{}]", i)});
        return true;
      }
    }
    return false;
  }
  for (const auto& kv : v.get_object()) {
    if (Find(kv.value(), depth + 1, steps)) {
      steps->push_back({false, std::string(kv.key())});
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<std::string> FindNonFiniteNumber(const json::value& v) {
  std::vector<Step> steps;
  if (!Find(v, 0, &steps)) return std::nullopt;
  std::string path;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (it != steps.rbegin() && !it->index) path += '.';
    path += it->text;
  }
  return path;
}

}  // namespace redline::api
