#include "bench/workload.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <fstream>
#include <sstream>

#include "bench/units.h"
#include "http/url.h"

namespace redline::bench {

namespace json = boost::json;

namespace {

// Common English words; with a leading space each is a single token in the
// GPT-2/Llama/Qwen BPE vocabularies, so N words ~ N tokens.
constexpr std::string_view kWords[] = {
    "the",  "of",     "and",    "to",    "in",    "is",    "that",  "for",
    "it",   "as",     "was",    "with",  "be",    "by",    "on",    "not",
    "he",   "this",   "are",    "or",    "his",   "from",  "at",    "which",
    "but",  "have",   "an",     "had",   "they",  "you",   "were",  "their",
    "one",  "all",    "we",     "can",   "her",   "has",   "there", "been",
    "if",   "more",   "when",   "will",  "would", "who",   "so",    "no",
    "time", "people", "year",   "way",   "day",   "man",   "thing", "world",
    "life", "hand",   "part",   "child", "eye",   "place", "work",  "week",
    "case", "point",  "number", "group", "fact",  "water", "book",  "word",
    "city", "house",  "river",  "light", "music", "table", "paper", "story",
    "road", "field",  "night",  "sound"};

std::string ReadFile(const std::string& path, Status* status) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *status = Status::NotFound("cannot open " + path);
    return {};
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<int64_t> JsonInt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<int64_t>(v->get_uint64());
  if (v->is_double()) return static_cast<int64_t>(v->get_double());
  return std::nullopt;
}

}  // namespace

int64_t LengthDist::Sample(std::mt19937_64& rng) const {
  double v = mean;
  switch (kind) {
    case Kind::kFixed:
      break;
    case Kind::kUniform: {
      std::uniform_int_distribution<int64_t> d(min, max);
      return d(rng);
    }
    case Kind::kNormal: {
      std::normal_distribution<double> d(mean, stddev);
      v = d(rng);
      break;
    }
    case Kind::kLognormal: {
      // Parameterized by the mean and sd of the result, not of the log.
      const double var = stddev * stddev, m2 = mean * mean;
      const double sigma = std::sqrt(std::log(1.0 + var / m2));
      const double mu = std::log(mean) - sigma * sigma / 2.0;
      std::lognormal_distribution<double> d(mu, sigma);
      v = d(rng);
      break;
    }
  }
  return std::clamp<int64_t>(static_cast<int64_t>(std::llround(v)), min, max);
}

Result<LengthDist> LengthDist::Parse(std::string_view text) {
  text = Trim(text);
  LengthDist d;
  auto two = [&](std::string_view inner, double* a, double* b) -> Status {
    size_t comma = inner.find(',');
    if (comma == std::string_view::npos)
      return Status::InvalidArgument("expected two numbers in '" +
                                     std::string(text) + "'");
    RL_ASSIGN_OR_RETURN(*a, ParseNumber(inner.substr(0, comma)));
    RL_ASSIGN_OR_RETURN(*b, ParseNumber(inner.substr(comma + 1)));
    return Status::Ok();
  };
  auto inner = [&](std::string_view prefix) -> std::optional<std::string_view> {
    if (text.substr(0, prefix.size()) == prefix && !text.empty() &&
        text.back() == ')') {
      return text.substr(prefix.size(), text.size() - prefix.size() - 1);
    }
    return std::nullopt;
  };
  if (auto in = inner("normal(")) {
    d.kind = Kind::kNormal;
    RL_RETURN_IF_ERROR(two(*in, &d.mean, &d.stddev));
  } else if (auto in2 = inner("lognormal(")) {
    d.kind = Kind::kLognormal;
    RL_RETURN_IF_ERROR(two(*in2, &d.mean, &d.stddev));
  } else if (size_t dots = text.find(".."); dots != std::string_view::npos) {
    d.kind = Kind::kUniform;
    double a = 0, b = 0;
    RL_ASSIGN_OR_RETURN(a, ParseNumber(text.substr(0, dots)));
    RL_ASSIGN_OR_RETURN(b, ParseNumber(text.substr(dots + 2)));
    d.min = static_cast<int64_t>(a);
    d.max = static_cast<int64_t>(b);
    d.mean = (a + b) / 2;
    if (d.max < d.min)
      return Status::InvalidArgument("length range '" + std::string(text) +
                                     "' has max < min");
    return d;
  } else {
    RL_ASSIGN_OR_RETURN(d.mean, ParseNumber(text));
    d.min = d.max = static_cast<int64_t>(d.mean);
    return d;
  }
  if (d.mean <= 0 || d.stddev < 0)
    return Status::InvalidArgument(
        "length distribution needs mean > 0, sd >= 0");
  d.min = 1;
  return d;
}

std::string Workload::SyntheticText(int64_t tokens, std::mt19937_64& rng) {
  std::string out;
  out.reserve(static_cast<size_t>(tokens) * 6);
  std::uniform_int_distribution<size_t> pick(0, std::size(kWords) - 1);
  for (int64_t i = 0; i < tokens; ++i) {
    if (i) out += ' ';
    out += kWords[pick(rng)];
  }
  return out;
}

Result<std::unique_ptr<Workload>> Workload::Create(std::vector<TaskSpec> tasks,
                                                   std::string default_model,
                                                   std::string base_path,
                                                   uint64_t seed) {
  if (tasks.empty()) return Status::InvalidArgument("workload has no tasks");
  std::unique_ptr<Workload> w(new Workload());
  w->default_model_ = std::move(default_model);
  w->base_path_ = std::move(base_path);
  double total = 0;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  for (TaskSpec& t : tasks) {
    if (t.weight < 0)
      return Status::InvalidArgument("task '" + t.name +
                                     "' has a negative weight");
    if (t.turns < 1)
      return Status::InvalidArgument("task '" + t.name + "' needs turns >= 1");
    total += t.weight;
    w->cumulative_weights_.push_back(total);
    TaskData data;
    std::string endpoint =
        t.endpoint.empty() ? std::string(api::ApiPath(t.api)) : t.endpoint;
    data.target = endpoint.front() == '/'
                      ? endpoint
                      : http::JoinPath(w->base_path_, endpoint);
    if (t.source == TaskSpec::Source::kJsonl ||
        t.source == TaskSpec::Source::kShareGpt) {
      Status st;
      std::string text = ReadFile(t.file, &st);
      if (!st.ok()) return st;
      if (t.source == TaskSpec::Source::kJsonl) {
        std::istringstream lines(text);
        std::string line;
        int line_no = 0;
        while (std::getline(lines, line)) {
          line_no++;
          if (Trim(line).empty()) continue;
          json::error_code ec;
          json::value v = json::parse(line, ec);
          if (ec || !v.is_object()) {
            return Status::InvalidArgument(
                t.file + ":" + std::to_string(line_no) + ": not a JSON object");
          }
          const json::object& o = v.get_object();
          Item item;
          if (const json::value* m = o.if_contains("messages");
              m && m->is_array()) {
            for (const json::value& e : m->get_array()) {
              if (!e.is_object()) continue;
              api::ChatMessage msg;
              if (auto* r = e.get_object().if_contains("role");
                  r && r->is_string())
                msg.role = std::string(r->get_string());
              if (auto* c = e.get_object().if_contains("content");
                  c && c->is_string())
                msg.content = std::string(c->get_string());
              item.messages.push_back(std::move(msg));
            }
          }
          for (std::string_view key : {"prompt", "text", "input"}) {
            if (auto* p = o.if_contains(key); p && p->is_string()) {
              item.prompt = std::string(p->get_string());
              break;
            }
          }
          if (item.messages.empty() && item.prompt.empty()) {
            return Status::InvalidArgument(t.file + ":" +
                                           std::to_string(line_no) +
                                           ": needs 'prompt' or 'messages'");
          }
          if (auto x = JsonInt(o, "max_tokens")) item.max_tokens = *x;
          if (auto x = JsonInt(o, "output_tokens")) item.max_tokens = *x;
          data.items.push_back(std::move(item));
        }
      } else {
        // ShareGPT: a JSON array (or JSONL) of {"conversations": [{"from",
        // "value"}]}.
        std::vector<json::value> convs;
        json::error_code ec;
        json::value v = json::parse(text, ec);
        if (!ec && v.is_array()) {
          for (auto& e : v.get_array()) convs.push_back(e);
        } else {
          std::istringstream lines(text);
          std::string line;
          while (std::getline(lines, line)) {
            if (Trim(line).empty()) continue;
            json::value e = json::parse(line, ec);
            if (ec)
              return Status::InvalidArgument(t.file + ": not ShareGPT JSON");
            convs.push_back(std::move(e));
          }
        }
        for (const json::value& c : convs) {
          if (!c.is_object()) continue;
          const json::value* turns =
              c.get_object().if_contains("conversations");
          if (turns == nullptr || !turns->is_array()) continue;
          Item item;
          for (const json::value& turn : turns->get_array()) {
            if (!turn.is_object()) continue;
            const json::object& to = turn.get_object();
            const json::value* from = to.if_contains("from");
            const json::value* value = to.if_contains("value");
            if (!from || !from->is_string() || !value || !value->is_string())
              continue;
            if (from->get_string() == "human" || from->get_string() == "user")
              item.turns.emplace_back(value->get_string());
          }
          if (!item.turns.empty()) data.items.push_back(std::move(item));
        }
      }
      if (data.items.empty())
        return Status::InvalidArgument(t.file + ": no usable prompts");
    }
    if (t.shared_prefix_tokens > 0) {
      for (int g = 0; g < std::max(1, t.prefix_groups); ++g) {
        data.prefixes.push_back(SyntheticText(t.shared_prefix_tokens, rng));
      }
    }
    const bool has_placeholder =
        t.prompt.find("{{prompt}}") != std::string::npos ||
        std::any_of(t.messages.begin(), t.messages.end(),
                    [](const api::ChatMessage& m) {
                      return m.content.find("{{prompt}}") != std::string::npos;
                    });
    if (t.source == TaskSpec::Source::kFixed && t.turns == 1 &&
        !has_placeholder && !t.output_tokens && t.shared_prefix_tokens == 0) {
      api::CompletionRequest r;
      r.kind = t.api;
      r.model = t.model.empty() ? w->default_model_ : t.model;
      r.messages = t.messages;
      r.prompt = t.prompt;
      // A fixed `prompt:` is the user message of a chat task too.
      if (t.api == api::ApiKind::kChat && r.messages.empty() &&
          !t.prompt.empty()) {
        if (!t.system_prompt.empty())
          r.messages.push_back({"system", t.system_prompt});
        r.messages.push_back({"user", t.prompt});
      }
      r.sampling = t.sampling;
      r.stream = t.stream;
      r.include_usage = t.include_usage;
      r.extra_json = t.extra_json;
      if (t.pin_output_length && r.sampling.max_tokens) {
        r.sampling.ignore_eos = true;
        r.sampling.min_tokens = r.sampling.max_tokens;
      }
      RL_ASSIGN_OR_RETURN(data.cached_body, api::SerializeRequest(r));
    } else {
      // Validate extra_json once.
      api::CompletionRequest probe;
      probe.extra_json = t.extra_json;
      RL_RETURN_IF_ERROR(api::SerializeRequest(probe).status());
    }
    w->data_.push_back(std::move(data));
  }
  if (total <= 0) return Status::InvalidArgument("task weights sum to zero");
  w->tasks_ = std::move(tasks);
  return w;
}

bool Workload::has_multi_turn() const {
  return std::any_of(tasks_.begin(), tasks_.end(), [](const TaskSpec& t) {
    return t.turns > 1 || t.source == TaskSpec::Source::kShareGpt;
  });
}

int Workload::PickTask(std::mt19937_64& rng) const {
  if (cumulative_weights_.size() == 1) return 0;
  std::uniform_real_distribution<double> u(0.0, cumulative_weights_.back());
  const double x = u(rng);
  auto it = std::upper_bound(cumulative_weights_.begin(),
                             cumulative_weights_.end(), x);
  return static_cast<int>(std::min<size_t>(it - cumulative_weights_.begin(),
                                           cumulative_weights_.size() - 1));
}

std::string Workload::Render(std::string_view templ,
                             const std::string& text) const {
  std::string out(templ);
  size_t pos;
  while ((pos = out.find("{{prompt}}")) != std::string::npos)
    out.replace(pos, 10, text);
  return out;
}

PreparedRequest Workload::Prepare(UserState& user) {
  if (user.task < 0 || user.turn >= user.turns) {
    user.task = PickTask(user.rng);
    user.turn = 0;
    user.history.clear();
    user.script.clear();
    user.session = next_session_++;
    const TaskSpec& t = tasks_[static_cast<size_t>(user.task)];
    user.turns = t.turns;
    if (t.source == TaskSpec::Source::kShareGpt) {
      TaskData& d = data_[static_cast<size_t>(user.task)];
      const Item& item = d.items[d.next_item++ % d.items.size()];
      user.script = item.turns;
      user.turns =
          t.turns > 1
              ? std::min<int>(t.turns, static_cast<int>(item.turns.size()))
              : static_cast<int>(item.turns.size());
    }
  }
  const size_t ti = static_cast<size_t>(user.task);
  const TaskSpec& t = tasks_[ti];
  TaskData& d = data_[ti];

  PreparedRequest out;
  out.task = user.task;
  out.turn = user.turn;
  out.session = user.turns > 1 ? user.session : -1;
  out.stream = t.stream;
  out.keep_text = user.turns > 1;
  out.http.method = "POST";
  out.http.target = d.target;
  out.http.headers = t.headers;
  out.http.headers.push_back({"Content-Type", "application/json"});
  if (t.stream) out.http.headers.push_back({"Accept", "text/event-stream"});

  if (!d.cached_body.empty()) {
    out.http.body = d.cached_body;
    user.turn++;
    return out;
  }

  api::CompletionRequest r;
  r.kind = t.api;
  r.model = t.model.empty() ? default_model_ : t.model;
  r.sampling = t.sampling;
  r.stream = t.stream;
  r.include_usage = t.include_usage;
  r.extra_json = t.extra_json;

  std::string prefix;
  if (!d.prefixes.empty()) {
    std::uniform_int_distribution<size_t> g(0, d.prefixes.size() - 1);
    prefix = d.prefixes[g(user.rng)] + "\n\n";
  }
  std::string user_text;
  int64_t planned = -1;
  const Item* item = nullptr;
  switch (t.source) {
    case TaskSpec::Source::kFixed:
    case TaskSpec::Source::kSynthetic: {
      if (t.source == TaskSpec::Source::kSynthetic || t.input_tokens.mean > 0) {
        planned = t.input_tokens.Sample(user.rng);
        user_text = SyntheticText(planned, user.rng);
      }
      break;
    }
    case TaskSpec::Source::kJsonl:
      item = &d.items[d.next_item++ % d.items.size()];
      user_text = item->prompt;
      break;
    case TaskSpec::Source::kShareGpt:
      user_text =
          user.script[static_cast<size_t>(user.turn) % user.script.size()];
      break;
  }
  if (planned >= 0 && t.shared_prefix_tokens > 0)
    planned += t.shared_prefix_tokens;

  if (t.api == api::ApiKind::kChat) {
    if (user.turn == 0 || user.history.empty()) {
      if (item != nullptr && !item->messages.empty()) {
        user.history = item->messages;
        if (!prefix.empty() && !user.history.empty())
          user.history.back().content = prefix + user.history.back().content;
      } else if (t.source == TaskSpec::Source::kFixed && !t.messages.empty()) {
        for (const api::ChatMessage& m : t.messages)
          user.history.push_back({m.role, Render(m.content, user_text)});
        if (!prefix.empty())
          user.history.back().content = prefix + user.history.back().content;
      } else {
        if (!t.system_prompt.empty())
          user.history.push_back({"system", t.system_prompt});
        // A fixed `prompt:` is the user message of a chat task too.
        const std::string text =
            t.source == TaskSpec::Source::kFixed && !t.prompt.empty()
                ? Render(t.prompt, user_text)
                : user_text;
        user.history.push_back({"user", prefix + text});
      }
    } else {
      // Later turns: the history (with the assistant replies fed back by
      // OnResponse) plus a new user message.
      if (user_text.empty())
        user_text = SyntheticText(
            t.input_tokens.mean > 0 ? t.input_tokens.Sample(user.rng) : 32,
            user.rng);
      user.history.push_back({"user", user_text});
    }
    r.messages = user.history;
  } else {
    std::string text = t.source == TaskSpec::Source::kFixed && !t.prompt.empty()
                           ? Render(t.prompt, user_text)
                           : user_text;
    if (user.turn > 0)
      text = user.history.empty() ? text
                                  : user.history.back().content + "\n" + text;
    r.prompt = prefix + text;
    user.history = {{"user", r.prompt}};
  }

  if (t.output_tokens)
    r.sampling.max_tokens = t.output_tokens->Sample(user.rng);
  if (item != nullptr && item->max_tokens > 0)
    r.sampling.max_tokens = item->max_tokens;
  if (t.pin_output_length && r.sampling.max_tokens) {
    r.sampling.ignore_eos = true;
    r.sampling.min_tokens = r.sampling.max_tokens;
  }
  out.input_tokens_planned = planned;
  auto body = api::SerializeRequest(r);
  out.http.body = body.ok()
                      ? std::move(*body)
                      : std::string("{}");  // extra_json validated in Create()
  user.turn++;
  return out;
}

void Workload::OnResponse(UserState& user, bool ok, std::string_view content) {
  if (user.task < 0) return;
  if (!ok) {
    user.turn = user.turns;  // a failed turn ends the session
    return;
  }
  if (user.turn < user.turns) {
    const TaskSpec& t = tasks_[static_cast<size_t>(user.task)];
    if (t.api == api::ApiKind::kChat) {
      user.history.push_back({"assistant", std::string(content)});
    } else if (!user.history.empty()) {
      user.history.back().content += std::string(content);
    }
  }
}

namespace {

Status ReadSampling(const YAML::Node& n, api::SamplingParams* s) {
  try {
    if (n["max_tokens"]) s->max_tokens = n["max_tokens"].as<int64_t>();
    if (n["temperature"]) s->temperature = n["temperature"].as<double>();
    if (n["top_p"]) s->top_p = n["top_p"].as<double>();
    if (n["top_k"]) s->top_k = n["top_k"].as<int64_t>();
    if (n["min_p"]) s->min_p = n["min_p"].as<double>();
    if (n["frequency_penalty"])
      s->frequency_penalty = n["frequency_penalty"].as<double>();
    if (n["presence_penalty"])
      s->presence_penalty = n["presence_penalty"].as<double>();
    if (n["repetition_penalty"])
      s->repetition_penalty = n["repetition_penalty"].as<double>();
    if (n["seed"]) s->seed = n["seed"].as<int64_t>();
    if (n["min_tokens"]) s->min_tokens = n["min_tokens"].as<int64_t>();
    if (n["ignore_eos"]) s->ignore_eos = n["ignore_eos"].as<bool>();
    if (n["stop"]) {
      if (n["stop"].IsSequence()) {
        for (const auto& x : n["stop"]) s->stop.push_back(x.as<std::string>());
      } else {
        s->stop.push_back(n["stop"].as<std::string>());
      }
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("bad sampling field: ") +
                                   e.what());
  }
  return Status::Ok();
}

// YAML scalar/map/sequence to JSON (for `extra:`).
json::value YamlToJson(const YAML::Node& n) {
  if (n.IsMap()) {
    json::object o;
    for (const auto& kv : n)
      o[kv.first.as<std::string>()] = YamlToJson(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    json::array a;
    for (const auto& x : n) a.push_back(YamlToJson(x));
    return a;
  }
  if (n.IsNull()) return nullptr;
  const std::string s = n.as<std::string>();
  if (n.Tag() == "!") return json::string(s);  // quoted in the YAML source
  if (s == "true") return true;
  if (s == "false") return false;
  auto num = ParseNumber(s);
  if (num.ok()) {
    if (s.find_first_of(".eE") == std::string::npos)
      return static_cast<int64_t>(*num);
    return *num;
  }
  return json::string(s);
}

}  // namespace

Result<std::vector<TaskSpec>> Workload::LoadScenario(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("scenario " + path + ": " + e.what());
  }
  const YAML::Node tasks = root["tasks"];
  if (!tasks || !tasks.IsSequence() || tasks.size() == 0) {
    return Status::InvalidArgument("scenario " + path +
                                   ": needs a non-empty 'tasks' list");
  }
  std::string dir = path.find('/') == std::string::npos
                        ? "."
                        : path.substr(0, path.rfind('/'));
  std::vector<TaskSpec> out;
  int index = 0;
  for (const YAML::Node& n : tasks) {
    TaskSpec t;
    const std::string where =
        "scenario " + path + " task " + std::to_string(index++);
    try {
      if (n["name"]) t.name = n["name"].as<std::string>();
      if (n["weight"]) t.weight = n["weight"].as<double>();
      if (n["api"]) {
        const std::string a = n["api"].as<std::string>();
        if (a == "chat") {
          t.api = api::ApiKind::kChat;
        } else if (a == "completions") {
          t.api = api::ApiKind::kCompletions;
        } else {
          return Status::InvalidArgument(where +
                                         ": api must be chat or completions");
        }
      }
      if (n["endpoint"]) t.endpoint = n["endpoint"].as<std::string>();
      if (n["model"]) t.model = n["model"].as<std::string>();
      if (n["stream"]) t.stream = n["stream"].as<bool>();
      if (n["include_usage"]) t.include_usage = n["include_usage"].as<bool>();
      if (n["messages"]) {
        for (const auto& m : n["messages"]) {
          t.messages.push_back(
              {m["role"].as<std::string>(), m["content"].as<std::string>()});
        }
      }
      if (n["prompt"]) t.prompt = n["prompt"].as<std::string>();
      if (n["system"]) t.system_prompt = n["system"].as<std::string>();
      std::string source =
          n["source"] ? n["source"].as<std::string>()
                      : (t.messages.empty() && t.prompt.empty() ? "synthetic"
                                                                : "fixed");
      if (source == "fixed") {
        t.source = TaskSpec::Source::kFixed;
      } else if (source == "synthetic") {
        t.source = TaskSpec::Source::kSynthetic;
      } else if (source == "jsonl") {
        t.source = TaskSpec::Source::kJsonl;
      } else if (source == "sharegpt") {
        t.source = TaskSpec::Source::kShareGpt;
      } else {
        return Status::InvalidArgument(
            where + ": source must be fixed, synthetic, jsonl or sharegpt");
      }
      if (n["file"]) {
        t.file = n["file"].as<std::string>();
        if (!t.file.empty() && t.file[0] != '/') t.file = dir + "/" + t.file;
      }
      if ((t.source == TaskSpec::Source::kJsonl ||
           t.source == TaskSpec::Source::kShareGpt) &&
          t.file.empty()) {
        return Status::InvalidArgument(where + ": source " + source +
                                       " needs 'file'");
      }
      if (n["input_tokens"]) {
        RL_ASSIGN_OR_RETURN(
            t.input_tokens,
            LengthDist::Parse(n["input_tokens"].as<std::string>()));
      } else if (t.source == TaskSpec::Source::kSynthetic) {
        t.input_tokens = LengthDist{LengthDist::Kind::kFixed, 128, 0, 128, 128};
      }
      if (n["output_tokens"]) {
        RL_ASSIGN_OR_RETURN(
            auto d, LengthDist::Parse(n["output_tokens"].as<std::string>()));
        t.output_tokens = d;
      }
      if (n["pin_output_length"])
        t.pin_output_length = n["pin_output_length"].as<bool>();
      RL_RETURN_IF_ERROR(ReadSampling(n, &t.sampling));
      if (n["extra"]) {
        if (!n["extra"].IsMap())
          return Status::InvalidArgument(where + ": 'extra' must be a map");
        t.extra_json = json::serialize(YamlToJson(n["extra"]));
      }
      if (n["headers"]) {
        for (const auto& kv : n["headers"])
          t.headers.push_back(
              {kv.first.as<std::string>(), kv.second.as<std::string>()});
      }
      if (n["turns"]) t.turns = n["turns"].as<int>();
      if (n["shared_prefix_tokens"])
        t.shared_prefix_tokens = n["shared_prefix_tokens"].as<int64_t>();
      if (n["prefix_groups"]) t.prefix_groups = n["prefix_groups"].as<int>();
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(where + ": " + e.what());
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace redline::bench
