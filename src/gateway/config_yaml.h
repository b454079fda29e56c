// Reads a gateway YAML config file: the `pools:` list into PoolSpecs, and
// every other top-level key into (long flag name, values, line) for the
// CLI to apply, so flags and file share one set of names and command-line
// flags win. Keys are written with dashes (`max-in-flight`); underscores
// are accepted too (`max_in_flight`). Errors name the file, the line and
// the key path ("pools[0].upstreams[1].first-byte-timeout").
//
// Thread-safety: pure function over the file.
#ifndef REDLINE_GATEWAY_CONFIG_YAML_H_
#define REDLINE_GATEWAY_CONFIG_YAML_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "gateway/gateway_config.h"

namespace redline::gateway {

struct FlagItem {
  std::string key;  // long flag name without dashes in front
  std::vector<std::string> values;
  int line = 0;
};

// `cache` and `routing` (optional) receive the `cache:` and `routing:`
// mappings; without them those sections are refused.
Status ParseGatewayYaml(const std::string& path, std::vector<PoolSpec>* pools,
                        std::vector<FlagItem>* flags,
                        CacheConfig* cache = nullptr,
                        RoutingConfig* routing = nullptr);

// The same from text (tests); `path` only names it in messages.
Status ParseGatewayYamlText(const std::string& text, const std::string& path,
                            std::vector<PoolSpec>* pools,
                            std::vector<FlagItem>* flags,
                            CacheConfig* cache = nullptr,
                            RoutingConfig* routing = nullptr);

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_CONFIG_YAML_H_
