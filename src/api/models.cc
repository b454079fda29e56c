#include "api/models.h"

#include <boost/json.hpp>

namespace redline::api {
namespace json = boost::json;
namespace {

json::object ModelObject(const ModelCard& card) {
  json::object m;
  m["id"] = card.id;
  m["object"] = "model";
  m["created"] = card.created;
  m["owned_by"] = card.owned_by;
  if (!card.aliases.empty()) {
    json::array a;
    for (const std::string& s : card.aliases) a.emplace_back(s);
    m["aliases"] = std::move(a);
  }
  if (card.meta) {
    const ModelMeta& c = *card.meta;
    json::object meta;
    meta["n_vocab"] = c.n_vocab;
    meta["n_ctx_train"] = c.n_ctx_train;
    meta["n_ctx"] = c.n_ctx;
    meta["n_embd"] = c.n_embd;
    meta["n_layer"] = c.n_layer;
    meta["architecture"] = c.architecture;
    meta["weight_types"] = c.weight_types;
    m["meta"] = std::move(meta);
    // vLLM's name for the context a request may use.
    m["max_model_len"] = c.n_ctx;
  } else {
    m["meta"] = nullptr;
  }
  return m;
}

}  // namespace

std::string BuildModel(const ModelCard& card) {
  return json::serialize(ModelObject(card));
}

std::string BuildModelList(const std::vector<ModelCard>& cards) {
  json::array data;
  for (const ModelCard& c : cards) data.push_back(ModelObject(c));
  json::object o;
  o["object"] = "list";
  o["data"] = std::move(data);
  return json::serialize(o);
}

Result<std::vector<std::string>> ParseModelIds(std::string_view body) {
  json::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec)
    return Status::DataLoss("models list is not valid JSON: " + ec.message());
  const json::object* o = v.if_object();
  const json::value* data = o ? o->if_contains("data") : nullptr;
  if (data == nullptr || !data->is_array())
    return Status::DataLoss("models list has no 'data' array");
  std::vector<std::string> ids;
  for (const json::value& m : data->get_array()) {
    const json::object* mo = m.if_object();
    const json::value* id = mo ? mo->if_contains("id") : nullptr;
    if (id != nullptr && id->is_string()) ids.emplace_back(id->get_string());
  }
  return ids;
}

}  // namespace redline::api
