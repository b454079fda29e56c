// ServedModel: one model a server answers for — its weights, thread pool,
// engine, chat prompt, start-up progress and metrics — and the sampling
// defaults applied to requests that omit a field.
//
// Ownership: the InferenceServer owns every ServedModel. The loader thread
// fills `model`, `draft_model`, `pool`, `engine`, `chat` and `n_ctx` before
// it posts
// "loaded" to the event loop, and never writes them again; after that the
// loop and sessions read them. `startup` and `engine_for_stats` are
// thread-safe.
#ifndef REDLINE_SERVER_SERVED_MODEL_H_
#define REDLINE_SERVER_SERVED_MODEL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/engine.h"
#include "model/arch/model.h"
#include "model/chat/chat_prompt.h"
#include "server/server_config.h"
#include "server/server_metrics.h"
#include "server/startup.h"

namespace redline::server {

struct ServedModel {
  ServedModel(ModelSpec s, ModelMetrics& m) : spec(std::move(s)), metrics(m) {}

  const ModelSpec spec;  // spec.name is what clients send as "model"
  ModelMetrics& metrics;
  StartupTracker startup;

  // ---- loader (written before "loaded" is posted) ----
  std::unique_ptr<model::Model> model;
  // spec.draft_model loaded (null: none); outlives the engine that runs it.
  std::unique_ptr<model::Model> draft_model;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<model::chat::ChatPrompt> chat;
  int64_t n_ctx = 0;
  // Longest token piece in bytes: a prompt longer than n_ctx x this cannot
  // fit, whatever it tokenizes to.
  int64_t max_piece_bytes = 0;
  std::atomic<engine::Engine*> engine_for_stats{nullptr};

  // ---- loop ----
  bool loaded = false;  // the loader is done with this model
  bool next_is_cold = true;

  // True for the name or one of the aliases.
  bool Answers(std::string_view name) const;
  // Loaded and warm (any thread: the loader's members are final then).
  bool Ready() const {
    const Phase p = startup.phase();
    return p == Phase::kReady || p == Phase::kDraining;
  }
};

}  // namespace redline::server

#endif  // REDLINE_SERVER_SERVED_MODEL_H_
