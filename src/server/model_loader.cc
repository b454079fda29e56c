// Loading every served model on the loader thread: weights, thread pool,
// engine, chat template, warm-up; per-model and aggregate start-up progress.
// The checks a bad configuration must fail before the port is bound
// (CheckModelFiles) are here too.
#include <fmt/format.h>

#include <chrono>
#include <fstream>

#include "base/logging.h"
#include "engine/draft_model.h"
#include "engine/kv_memory.h"
#include "model/arch/kv_cache.h"
#include "model/chat/chat_template.h"
#include "model/gguf/gguf.h"
#include "model/tokenizer/tokenizer.h"
#include "server/server_internal.h"

namespace redline::server {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

std::string ProgressBar(double p) {
  constexpr int kWidth = 20;
  const int filled = static_cast<int>(p * kWidth + 0.5);
  return std::string(filled, '#') + std::string(kWidth - filled, '.');
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

// The config was validated (ParseKvType) before it gets here.
model::KvType KvTypeOf(const std::string& name) {
  auto type = model::ParseKvType(name);
  return type.ok() ? *type : model::KvType::kF16;
}

}  // namespace

int64_t ContextTokens(const ModelSpec& spec, int64_t train_ctx) {
  if (spec.ctx_tokens > 0) return spec.ctx_tokens;
  return train_ctx > 0 ? std::min<int64_t>(train_ctx, 4096) : 4096;
}

Status CheckModelFiles(const ServerConfig& config) {
  // Every model's caches come out of the same memory.
  std::optional<int64_t> available = engine::ReadMemAvailableBytes();
  for (const ModelSpec& spec : config.models) {
    auto file = model::gguf::GgufFile::Open(spec.path);
    if (!file.ok())
      return file.status().WithContext("model '" + spec.name + "'");
    auto mc = model::ModelConfig::FromGguf(*file);
    if (!mc.ok()) return mc.status().WithContext("model '" + spec.name + "'");
    const int64_t n_ctx = ContextTokens(spec, mc->context_length_train);
    const model::KvType kv = KvTypeOf(spec.kv_type);
    RL_RETURN_IF_ERROR(
        engine::CheckKvCacheFits(*mc, n_ctx, spec.parallel, kv, available)
            .WithContext("model '" + spec.name + "'"));
    if (available)
      *available -= spec.parallel * model::KvCacheBytes(*mc, n_ctx, kv);
    if (spec.draft_model.empty()) continue;
    // The draft's caches (one per slot, of the target's context) come out
    // of the same memory.
    const std::string where =
        "model '" + spec.name + "': --draft-model " + spec.draft_model;
    auto draft_file = model::gguf::GgufFile::Open(spec.draft_model);
    if (!draft_file.ok()) return draft_file.status().WithContext(where);
    auto dc = model::ModelConfig::FromGguf(*draft_file);
    if (!dc.ok()) return dc.status().WithContext(where);
    RL_RETURN_IF_ERROR(
        engine::CheckKvCacheFits(*dc, n_ctx, spec.parallel, kv, available)
            .WithContext(where));
    if (available)
      *available -= spec.parallel * model::KvCacheBytes(*dc, n_ctx, kv);
  }
  return Status::Ok();
}

bool ServedModel::Answers(std::string_view name) const {
  if (name == spec.name) return true;
  for (const std::string& a : spec.aliases) {
    if (name == a) return true;
  }
  return false;
}

void InferenceServer::Impl::LoaderMain() {
  startup.SetPhase(Phase::kLoading);
  for (size_t i = 0; i < models.size(); ++i) {
    if (shutdown_requested.load()) break;
    if (!LoadModel(*models[i], i)) return;
  }
  loop.Post([this] {
    loader_done = true;
    if (draining) {
      CheckDrain();
      return;
    }
    bool all = true;
    for (auto& m : models) all = all && m->loaded;
    if (!all) return;
    serving = true;
    startup.SetPhase(Phase::kReady);
    const StartupSnapshot s = startup.Snapshot();
    RL_LOG(kInfo,
           "serve: ready at http://{}:{} — {} model(s), start-up {:.2f} s",
           config.host, port, models.size(), s.startup_s);
  });
}

bool InferenceServer::Impl::LoadModel(ServedModel& m, size_t index) {
  const ModelSpec& spec = m.spec;
  const auto t_start = std::chrono::steady_clock::now();
  m.startup.SetPhase(Phase::kLoading);
  model::LoadOptions lo;
  lo.mlock = config.mlock;
  lo.prefetch = true;
  lo.repack = !config.no_repack;
  lo.threads = spec.threads;
  int last_decile = -1;
  const double n = static_cast<double>(models.size());
  lo.progress = [&](double p) {
    m.startup.SetLoadProgress(p);
    startup.SetLoadProgress((static_cast<double>(index) + p) / n);
    const int decile = static_cast<int>(p * 10);
    if (decile != last_decile) {
      last_decile = decile;
      RL_LOG(kInfo, "serve: loading '{}' [{}] {:3.0f}% {:.1f} s", spec.name,
             ProgressBar(p), p * 100, SecondsSince(t_start));
    }
    if (config.load_step_delay_ms_for_test > 0) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(config.load_step_delay_ms_for_test));
    }
  };
  auto fail = [this, &m](std::string why) {
    why = "model '" + m.spec.name + "': " + why;
    RL_LOG(kError, "serve: {}", why);
    m.startup.Fail(why);
    startup.Fail(why);
    loop.Post([this, why] { OnLoadFailed(why); });
    return false;
  };
  auto loaded = model::Model::Load(spec.path, lo);
  if (!loaded.ok())
    return fail("loading the model failed: " + loaded.status().ToString());
  m.model = std::move(loaded).value();
  if (!spec.draft_model.empty()) {
    lo.progress = nullptr;
    auto draft = model::Model::Load(spec.draft_model, lo);
    if (!draft.ok())
      return fail("loading the draft model " + spec.draft_model +
                  " failed: " + draft.status().ToString());
    m.draft_model = std::move(draft).value();
    if (Status s = engine::CheckDraftVocabulary(*m.model, *m.draft_model);
        !s.ok())
      return fail("--draft-model " + spec.draft_model + ": " + s.message());
  }
  const double load_s = SecondsSince(t_start);
  m.startup.SetLoadSeconds(load_s);
  startup.SetLoadSeconds(load_s);

  // Chat template: --chat-template-file, --chat-template NAME, else the
  // model's.
  std::string source, origin;
  if (!spec.chat_template_file.empty()) {
    auto text = ReadWholeFile(spec.chat_template_file);
    if (!text.ok())
      return fail("--chat-template-file: " + text.status().message());
    source = std::move(text).value();
    origin = "file " + spec.chat_template_file;
  } else if (!spec.chat_template_name.empty()) {
    auto text = model::chat::BuiltinChatTemplate(spec.chat_template_name);
    if (!text.ok()) return fail("--chat-template: " + text.status().message());
    source = std::move(text).value();
    origin = "builtin:" + spec.chat_template_name;
  }
  model::chat::RenderBudget budget;
  budget.max_time_ms = config.template_time_budget_ms;
  budget.max_memory_bytes =
      static_cast<size_t>(config.template_memory_budget_mb) << 20;
  auto chat_prompt =
      model::chat::ChatPrompt::Create(*m.model, source, origin, budget);
  if (!chat_prompt.ok()) return fail(chat_prompt.status().ToString());
  m.chat = std::move(chat_prompt).value();

  m.n_ctx = ContextTokens(spec, m.model->config().context_length_train);
  if (const model::Tokenizer* tok = m.model->tokenizer()) {
    for (int32_t id = 0; id < tok->vocab_size(); ++id) {
      m.max_piece_bytes =
          std::max<int64_t>(m.max_piece_bytes,
                            static_cast<int64_t>(tok->TokenToPiece(id).size()));
    }
  }
  m.pool = std::make_unique<ThreadPool>(spec.threads);
  engine::EngineOptions eo;
  eo.n_ctx = m.n_ctx;
  eo.parallel = spec.parallel;
  eo.max_batch_tokens = spec.batch_tokens;
  eo.max_waiting_requests = config.max_queued_requests;
  eo.max_waiting_prompt_tokens = config.max_queued_tokens;
  eo.queue_budget_s = config.queue_budget_s;
  eo.prefix_cache = !config.no_prefix_cache;
  eo.kv_type = KvTypeOf(spec.kv_type);
  eo.speculative.enabled = config.speculative || m.draft_model != nullptr;
  eo.speculative.max_draft_tokens = config.draft_max;
  eo.draft_model = m.draft_model.get();
  auto engine = engine::Engine::Create(*m.model, *m.pool, eo);
  if (!engine.ok()) return fail(engine.status().ToString());
  m.engine = std::move(engine).value();
  m.engine_for_stats.store(m.engine.get());
  // The KV caches are the memory that grows with --parallel x --ctx; say
  // how much they hold so a person can size both (the draft model's are
  // counted with the target's, and named).
  int64_t kv_bytes =
      eo.parallel * model::KvCacheBytes(m.model->config(), m.n_ctx, eo.kv_type);
  std::string draft_note;
  if (m.draft_model != nullptr) {
    const int64_t draft_bytes =
        eo.parallel *
        model::KvCacheBytes(m.draft_model->config(), m.n_ctx, eo.kv_type);
    kv_bytes += draft_bytes;
    draft_note =
        fmt::format(" incl. {:.1f} MiB of draft model {} ({}, {} layers)",
                    static_cast<double>(draft_bytes) / 1048576.0,
                    spec.draft_model, m.draft_model->WeightTypeSummary(),
                    m.draft_model->config().block_count);
  }
  RL_LOG(kInfo,
         "serve: loaded '{}' from {} ({}, {} layers, vocab {}) in {:.2f} s; {} "
         "threads, {} slots x {} tokens, KV cache {:.1f} MiB ({}){}, chat "
         "template: {}",
         spec.name, spec.path, m.model->WeightTypeSummary(),
         m.model->config().block_count, m.model->config().vocab_size, load_s,
         m.pool->num_threads(), eo.parallel, m.n_ctx,
         static_cast<double>(kv_bytes) / 1048576.0, spec.kv_type, draft_note,
         m.chat->origin());

  m.startup.SetPhase(Phase::kWarming);
  if (index + 1 == models.size()) startup.SetPhase(Phase::kWarming);
  if (!config.no_warmup && !shutdown_requested.load()) {
    const auto t_warm = std::chrono::steady_clock::now();
    std::string error;
    if (!WarmUp(m, &error)) return fail("warm-up failed: " + error);
    m.startup.SetWarmupSeconds(SecondsSince(t_warm));
    startup.SetWarmupSeconds(SecondsSince(t_warm));
    RL_LOG(kInfo, "serve: '{}' warm-up done in {:.2f} s", spec.name,
           SecondsSince(t_warm));
  } else {
    m.startup.SetWarmupSeconds(0);
    startup.SetWarmupSeconds(0);
  }
  m.startup.SetPhase(Phase::kReady);
  loop.Post([this, index] { OnModelLoaded(index); });
  return true;
}

void InferenceServer::Impl::OnModelLoaded(size_t index) {
  ServedModel& m = *models[index];
  m.loaded = true;
  m.metrics.SetPhase(Phase::kReady);
}

// Runs a short generation on min(2, slots) sequences at once, so the first
// user request finds the weights paged in, the kernels' scratch allocated and
// the batched decode path exercised.
bool InferenceServer::Impl::WarmUp(ServedModel& m, std::string* error) {
  std::vector<int32_t> prompt;
  if (const model::Tokenizer* tok = m.model->tokenizer()) {
    prompt =
        tok->Encode("Warm-up: the quick brown fox jumps over the lazy dog.",
                    /*add_special=*/true,
                    /*parse_special=*/false);
  }
  if (prompt.empty()) {
    for (int32_t i = 0; i < 8 && i < m.model->config().vocab_size; ++i)
      prompt.push_back(i);
  }
  std::vector<engine::EngineRequest> requests;
  for (int i = 0; i < std::min(2, m.spec.parallel); ++i) {
    engine::EngineRequest r;
    r.prompt = prompt;
    if (static_cast<int64_t>(r.prompt.size()) + 8 >= m.n_ctx)
      r.prompt.resize(std::max<int64_t>(1, m.n_ctx / 2));
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 4;
    r.sampling.ignore_eos = true;
    // A 4-token run must not seed the service-time estimate of admission.
    r.warmup = true;
    requests.push_back(std::move(r));
  }
  auto streams = m.engine->SubmitGroup(std::move(requests));
  if (!streams.ok()) {
    *error = streams.status().ToString();
    return false;
  }
  for (auto& s : *streams) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::minutes(5);
    for (;;) {
      engine::RequestEvent e;
      if (!s->Pop(&e, std::chrono::milliseconds(200))) {
        if (std::chrono::steady_clock::now() > deadline) {
          *error = "no answer within 5 minutes";
          return false;
        }
        continue;
      }
      if (e.type == engine::RequestEvent::Type::kDone) break;
      if (e.type == engine::RequestEvent::Type::kError) {
        *error = e.status.ToString();
        return false;
      }
    }
  }
  return true;
}

void InferenceServer::Impl::OnLoadFailed(std::string why) {
  loader_done = true;
  for (auto& m : models) {
    if (m->startup.phase() == Phase::kFailed)
      m->metrics.SetPhase(Phase::kFailed);
  }
  if (config.exit_on_load_failure) {
    FinalStop(1);
  } else if (draining) {
    CheckDrain();
  }
}

}  // namespace redline::server
