// redline run: generate from a GGUF model on the command line, streaming the
// text, then print timings (load, prefill, TTFT, decode).
#include <fmt/format.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>

#include "base/progress.h"
#include "base/thread_pool.h"
#include "cli/command_registry.h"
#include "engine/draft_model.h"
#include "engine/generator.h"
#include "model/chat/chat_prompt.h"
#include "model/chat/chat_template.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::cli {
namespace {

struct RunFlags {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  std::string prompt_ids;
  bool print_ids = false;
  bool quiet = false;
  int threads = 0;
  int64_t ctx = 0;  // 0: min(the model's trained context, 4096)
  int64_t batch = 256;
  std::string kv_type = "f16";
  int32_t max_tokens = 128;
  model::SamplingParams sampling;
  bool no_bos = false;
  bool mlock = false;
  bool no_repack = false;
  // Chat: the prompt (if any) becomes the last user message, wrapped in the
  // model's chat template (or --chat-template NAME|FILE).
  bool chat = false;
  std::string system;
  std::string messages_file;
  std::string chat_template;
  engine::SpeculativeOptions speculative;
  std::string draft_model;  // drafts from this GGUF model (implies speculative)
};

// Messages for a chat prompt: --messages FILE (a JSON list of messages or an
// object with "messages"), then -sys and -p appended as system/user turns.
Result<boost::json::array> ChatMessages(const RunFlags& f) {
  boost::json::array messages;
  if (!f.messages_file.empty()) {
    std::ifstream in(f.messages_file, std::ios::binary);
    if (!in) return Status::NotFound("cannot read " + f.messages_file);
    std::string text((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(text, ec);
    if (ec)
      return Status::InvalidArgument(f.messages_file +
                                     ": invalid JSON: " + ec.message());
    if (v.is_object() && v.as_object().contains("messages"))
      v = v.as_object().at("messages");
    if (!v.is_array())
      return Status::InvalidArgument(f.messages_file +
                                     ": expected a list of messages");
    messages = v.as_array();
  }
  if (!f.system.empty())
    messages.insert(
        messages.begin(),
        boost::json::object{{"role", "system"}, {"content", f.system}});
  if (!f.prompt.empty())
    messages.push_back(
        boost::json::object{{"role", "user"}, {"content", f.prompt}});
  if (messages.empty())
    return Status::InvalidArgument("the chat has no messages");
  return messages;
}

// --chat-template: a built-in name or a Jinja file; empty = the model's own.
Result<std::string> ChatTemplateSource(const std::string& spec) {
  if (spec.empty()) return std::string();
  if (auto builtin = model::chat::BuiltinChatTemplate(spec); builtin.ok())
    return *builtin;
  std::ifstream in(spec, std::ios::binary);
  if (!in)
    return Status::NotFound(
        "--chat-template: '" + spec +
        "' is neither a built-in template nor a readable file");
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

Result<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::string item;
  std::stringstream ss(text);
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX) {
      return Status::InvalidArgument("--prompt-ids: '" + item +
                                     "' is not a token id");
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) return Status::InvalidArgument("--prompt-ids is empty");
  return ids;
}

int RunRun(RunFlags f) {
  const auto load_start = std::chrono::steady_clock::now();
  model::LoadOptions lo;
  lo.mlock = f.mlock;
  lo.repack = !f.no_repack;
  lo.threads = f.threads;
  // Created at the first report, so a file that fails to open prints
  // only its error.
  std::optional<Progress> progress;
  if (!f.quiet) {
    lo.progress = [&progress, &f](double done) {
      if (!progress)
        progress.emplace("run: loading " + f.model, 1.0,
                         ProgressUnit::kFraction);
      progress->Set(done);
    };
  }
  auto loaded = model::Model::Load(f.model, lo);
  if (progress) progress->Finish();
  if (!loaded.ok()) {
    fmt::print(stderr, "run: {}\n", loaded.status().ToString());
    return 1;
  }
  const model::Model& m = **loaded;
  std::unique_ptr<model::Model> draft;
  if (!f.draft_model.empty()) {
    lo.progress = nullptr;
    auto d = model::Model::Load(f.draft_model, lo);
    if (!d.ok()) {
      fmt::print(stderr, "run: --draft-model: {}\n", d.status().ToString());
      return 1;
    }
    draft = std::move(d).value();
    if (Status s = engine::CheckDraftVocabulary(m, *draft); !s.ok()) {
      fmt::print(stderr, "run: --draft-model {}: {}\n", f.draft_model,
                 s.message());
      return 1;
    }
    f.speculative.enabled = true;
  }
  const double load_ms = std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - load_start)
                             .count();

  std::vector<int32_t> prompt;
  if (!f.prompt_ids.empty()) {
    auto ids = ParseIds(f.prompt_ids);
    if (!ids.ok()) {
      fmt::print(stderr, "run: {}\n", ids.status().message());
      return 2;
    }
    prompt = *ids;
  } else if (f.chat || !f.system.empty() || !f.messages_file.empty()) {
    auto messages = ChatMessages(f);
    auto source = messages.ok() ? ChatTemplateSource(f.chat_template)
                                : Result<std::string>(messages.status());
    if (!source.ok()) {
      fmt::print(stderr, "run: {}\n", source.status().message());
      return 2;
    }
    auto chat = model::chat::ChatPrompt::Create(
        m, *source, f.chat_template.empty() ? "model" : f.chat_template);
    if (!chat.ok()) {
      fmt::print(stderr, "run: {}\n", chat.status().message());
      return 1;
    }
    auto ids = (*chat)->ChatTokens(*messages, boost::json::array());
    if (!ids.ok()) {
      fmt::print(stderr, "run: chat template: {}\n", ids.status().message());
      return 2;
    }
    prompt = *ids;
  } else {
    if (m.tokenizer() == nullptr) {
      fmt::print(
          stderr,
          "run: this model has no usable tokenizer ({}); use --prompt-ids\n",
          m.tokenizer_status().ToString());
      return 1;
    }
    prompt = m.tokenizer()->Encode(f.prompt, /*add_special=*/!f.no_bos,
                                   /*parse_special=*/false);
    if (prompt.empty()) {
      fmt::print(stderr, "run: the prompt encodes to no tokens\n");
      return 2;
    }
  }
  f.sampling.max_tokens = f.max_tokens;
  auto kv_type = model::ParseKvType(f.kv_type);
  if (!kv_type.ok()) {
    fmt::print(stderr, "run: {}\n", kv_type.status().ToString());
    return 2;
  }
  // Like serve: the trained context, capped at 4096, unless --ctx says.
  const int64_t train_ctx = m.config().context_length_train;
  if (f.ctx <= 0)
    f.ctx = train_ctx > 0 ? std::min<int64_t>(train_ctx, 4096) : 4096;
  if (train_ctx > 0 && f.ctx > train_ctx) {
    fmt::print(stderr,
               "run: warning: --ctx {} exceeds the model's trained context of "
               "{} tokens; output past it is unreliable\n",
               f.ctx, train_ctx);
  }
  ThreadPool pool(f.threads);
  auto created =
      engine::Generator::Create(m, pool, f.ctx, f.batch, *kv_type, draft.get());
  if (!created.ok()) {
    fmt::print(stderr, "run: {}\n", created.status().message());
    return 2;
  }
  engine::Generator& gen = **created;
  auto r = gen.Generate(
      prompt, f.sampling,
      [](std::string_view text, int32_t) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return true;
      },
      f.speculative);
  if (!r.ok()) {
    fmt::print(stderr, "\nrun: {}\n", r.status().ToString());
    return r.status().code() == StatusCode::kInternal ? 1 : 2;
  }
  std::fputc('\n', stdout);
  if (f.print_ids) {
    std::string ids;
    for (int32_t id : r->tokens)
      ids += fmt::format("{}{}", ids.empty() ? "" : " ", id);
    fmt::print("{}\n", ids);
  }
  std::fflush(stdout);
  fmt::print(stderr,
             "\n{} | {} threads | finish: {}\n"
             "model load        {:9.1f} ms\n"
             "prompt tokens     {:9d}\n"
             "prefill           {:9.1f} tok/s ({:.1f} ms)\n"
             "time to 1st token {:9.1f} ms\n"
             "decode            {:9.1f} tok/s ({} tokens in {:.1f} ms)\n",
             m.config().name.empty() ? f.model : m.config().name,
             pool.num_threads(), model::FinishReasonName(r->finish), load_ms,
             r->prompt_tokens, r->prefill_tok_per_s(), r->prefill_ms,
             r->ttft_ms, r->decode_tok_per_s(), r->tokens.size(), r->decode_ms);
  if (f.speculative.enabled) {
    const engine::SpeculativeStats& s = r->speculative;
    fmt::print(stderr,
               "speculative       {:9.2f} tokens per pass ({} drafted, {} "
               "accepted, {:.0f} % acceptance; drafts from {})\n",
               s.tokens_per_pass(), s.drafted_tokens, s.accepted_tokens,
               100 * s.acceptance_rate(),
               draft != nullptr ? "the draft model" : "prompt lookup");
  }
  return 0;
}

void Setup(CLI::App& sub, int* exit_code) {
  auto f = std::make_shared<RunFlags>();
  sub.add_option("-m,--model", f->model, "GGUF model file")->required();
  auto* p = sub.add_option("-p,--prompt", f->prompt, "Prompt text");
  auto* ids =
      sub.add_option("--prompt-ids", f->prompt_ids,
                     "Prompt as comma-separated token ids (exact input)");
  p->excludes(ids);
  sub.add_flag("--print-ids", f->print_ids,
               "Print the generated token ids on one line at the end");
  auto* file = sub.add_option("-f,--file", f->prompt_file,
                              "Read the prompt text from this file");
  file->excludes(p)->excludes(ids);
  sub.add_option("-n,--max-tokens,--n-predict", f->max_tokens,
                 "Tokens to generate at most (-1: until the context is full)")
      ->capture_default_str();
  sub.add_option("-c,--ctx-size,--max-model-len,--ctx", f->ctx,
                 "Context length in tokens (KV cache size; 0: min(model's "
                 "trained context, 4096))")
      ->capture_default_str();
  sub.add_option("-b,--batch,--batch-size", f->batch,
                 "Prefill batch size in tokens")
      ->capture_default_str();
  sub.add_option("--kv-type", f->kv_type,
                 "KV cache element type: f16 (half the memory of f32), q8_0 "
                 "(about half of f16; heads of a multiple of 32) or f32 "
                 "(exact values)")
      ->capture_default_str();
  sub.add_option("-t,--threads", f->threads,
                 "Threads (default: physical cores)");
  sub.add_option("--temp,--temperature", f->sampling.temperature,
                 "Temperature; 0 = greedy")
      ->capture_default_str();
  sub.add_option("--top-k", f->sampling.top_k,
                 "Keep the k most likely tokens (0 = off)")
      ->capture_default_str();
  sub.add_option("--top-p", f->sampling.top_p, "Nucleus sampling mass")
      ->capture_default_str();
  sub.add_option("--min-p", f->sampling.min_p,
                 "Drop tokens below min_p x the top probability")
      ->capture_default_str();
  sub.add_option("--repeat-penalty", f->sampling.repetition_penalty,
                 "Repetition penalty (1 = off)")
      ->capture_default_str();
  sub.add_option("--repeat-last-n", f->sampling.penalty_last_n,
                 "Tokens the repetition penalty looks back over")
      ->capture_default_str();
  sub.add_option("--presence-penalty", f->sampling.presence_penalty,
                 "Presence penalty")
      ->capture_default_str();
  sub.add_option("--frequency-penalty", f->sampling.frequency_penalty,
                 "Frequency penalty")
      ->capture_default_str();
  sub.add_option("-s,--seed", f->sampling.seed,
                 "Sampling seed (same seed + same input = same output)");
  sub.add_option("--stop", f->sampling.stop,
                 "Stop string (repeatable); not included in the output");
  sub.add_flag("--ignore-eos", f->sampling.ignore_eos,
               "Keep generating after end-of-generation tokens");
  sub.add_flag("--no-bos", f->no_bos,
               "Do not add the BOS token to a text prompt");
  sub.add_flag("--speculative,--lookup", f->speculative.enabled,
               "Prompt-lookup speculative decoding: verify drafts taken from "
               "n-gram matches in the prompt and output (same output, faster "
               "when the text repeats its input)");
  sub.add_option("--draft-model,--model-draft", f->draft_model,
                 "Speculative decoding with drafts from this small GGUF "
                 "model (same vocabulary; implies --speculative)");
  sub.add_option("--draft-max", f->speculative.max_draft_tokens,
                 "Most draft tokens verified per pass (with --speculative "
                 "or --draft-model)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  sub.add_flag("--mlock", f->mlock, "Pin the weights in RAM");
  sub.add_flag("-q,--quiet", f->quiet, "No progress output while loading");
  sub.add_flag("--no-repack", f->no_repack,
               "Read weights from the file's pages (no copy into huge pages, "
               "no packed panels): faster load, slower products");
  sub.add_flag(
      "--chat", f->chat,
      "Treat -p as a user message and apply the model's chat template");
  sub.add_option("-y,--system", f->system, "System message (implies --chat)");
  sub.add_option("--messages", f->messages_file,
                 "JSON file with the chat messages (implies --chat)");
  sub.add_option("--chat-template,--chat-template-file", f->chat_template,
                 "Chat template instead of the model's: chatml, llama3, "
                 "llama2, mistral, phi3, gemma or a Jinja file");
  sub.callback([f, exit_code, p, ids, file] {
    if (p->count() == 0 && ids->count() == 0 && file->count() == 0 &&
        f->messages_file.empty()) {
      fmt::print(stderr,
                 "run: give a prompt with -p TEXT, -f FILE or --prompt-ids "
                 "1,2,3\n");
      *exit_code = 2;
      return;
    }
    if (!f->prompt_file.empty()) {
      std::ifstream in(f->prompt_file, std::ios::binary);
      if (!in) {
        fmt::print(stderr, "run: cannot read {}\n", f->prompt_file);
        *exit_code = 2;
        return;
      }
      f->prompt.assign(std::istreambuf_iterator<char>(in),
                       std::istreambuf_iterator<char>());
    }
    *exit_code = RunRun(*f);
  });
}

}  // namespace

RL_REGISTER_COMMAND(run, "Generate text from a GGUF model and print timings",
                    Setup);

}  // namespace redline::cli
