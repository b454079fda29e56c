// The /v1/models wire format: the list a server or gateway answers, one
// model (GET /v1/models/{id}, the SDKs' models.retrieve), and the list's
// parser for clients.
//
// Thread-safety: plain values and pure functions.
#ifndef REDLINE_API_MODELS_H_
#define REDLINE_API_MODELS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace redline::api {

// Details of a loaded model (llama.cpp's "meta"; absent while loading).
struct ModelMeta {
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_ctx = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  std::string architecture;
  std::string weight_types;
};

struct ModelCard {
  std::string id;
  int64_t created = 0;  // Unix seconds
  std::string owned_by = "redline";
  std::vector<std::string> aliases;  // other names that route to it
  std::optional<ModelMeta> meta;     // null until loaded
};

// {"object": "model", "id", ...}
std::string BuildModel(const ModelCard& card);
// {"object": "list", "data": [model, ...]}
std::string BuildModelList(const std::vector<ModelCard>& cards);

// The ids of a /v1/models body. Invalid JSON or no "data" array is an error.
Result<std::vector<std::string>> ParseModelIds(std::string_view body);

}  // namespace redline::api

#endif  // REDLINE_API_MODELS_H_
