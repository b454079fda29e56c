#include "engine/model_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "base/json_escape.h"
#include "base/thread_pool.h"
#include "kernels/isa.h"
#include "model/arch/transformer.h"
#include "model/sampling/sampling_ops.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::engine {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The stage rows of one phase from its profile plus extra timed rows, with
// "other" closing the gap to the wall time.
ProfilePhase MakePhase(std::string name, int64_t tokens, double wall_ms,
                       const model::ForwardProfile& p,
                       const std::vector<std::pair<std::string, double>>& extra,
                       double bandwidth_gbps) {
  ProfilePhase ph;
  ph.name = std::move(name);
  ph.tokens = tokens;
  ph.wall_ms = wall_ms;
  double accounted = 0;
  for (int i = 0; i < model::kNumForwardStages; ++i) {
    const auto stage = static_cast<model::ForwardStage>(i);
    ProfileRow r;
    r.stage = std::string(model::ForwardStageName(stage));
    r.ms = static_cast<double>(p.ns[i]) / 1e6;
    if (p.ns[i] > 0) {
      const double s = static_cast<double>(p.ns[i]) / 1e9;
      r.gflops = p.flops[i] / s / 1e9;
      if (model::IsMatMulStage(stage)) {
        r.gbps = static_cast<double>(p.weight_bytes[i]) / s / 1e9;
        if (bandwidth_gbps > 0) r.roofline = r.gbps / bandwidth_gbps;
      }
    }
    accounted += r.ms;
    ph.rows.push_back(std::move(r));
  }
  for (const auto& [stage, ms] : extra) {
    ProfileRow r;
    r.stage = stage;
    r.ms = ms;
    accounted += ms;
    ph.rows.push_back(std::move(r));
  }
  ProfileRow other;
  other.stage = "other (unaccounted)";
  other.ms = wall_ms - accounted;
  ph.rows.push_back(std::move(other));
  for (ProfileRow& r : ph.rows) r.share = wall_ms > 0 ? r.ms / wall_ms : 0;
  return ph;
}

}  // namespace

Result<ModelProfileResult> RunModelProfile(const std::string& path,
                                           const ModelProfileOptions& o) {
  if (o.prompt_tokens < 1 || o.decode_tokens < 1)
    return Status::InvalidArgument(
        "the prompt and decode token counts must be at least 1");
  if (o.prompt_tokens + o.decode_tokens > (int64_t{1} << 20))
    return Status::InvalidArgument("the profile's token counts are too large");
  ModelProfileResult r;
  model::LoadTimings lt;
  model::LoadOptions lo;
  lo.repack = o.repack;
  lo.threads = o.threads;
  lo.timings = &lt;
  const auto t_load = Clock::now();
  auto loaded = model::Model::Load(path, lo);
  if (!loaded.ok()) return loaded.status();
  const double load_ms = MsSince(t_load);
  const model::Model& m = **loaded;
  const model::ModelConfig& c = m.config();
  r.model_path = path;
  r.arch = c.arch_name;
  r.weight_types = m.WeightTypeSummary();
  r.isa = std::string(kernels::IsaName(kernels::ActiveIsa()));
  ThreadPool pool(o.threads);
  r.threads = pool.num_threads();
  if (o.measure_bandwidth) r.bandwidth = MeasureMemoryBandwidth(pool);
  const double bw = r.bandwidth.best_gbps();

  RL_RETURN_IF_ERROR(model::CheckKvType(c, o.kv_type));
  model::Transformer tf(c, m.weights(), pool,
                        std::max<int64_t>(1, o.batch_tokens));
  const int64_t n_ctx = o.prompt_tokens + o.decode_tokens + 1;
  model::KvCache cache = tf.NewCache(n_ctx, o.kv_type);
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  // Deterministic, spread-out prompt ids (real text is not needed to time
  // the arithmetic; ids only select embedding rows).
  std::vector<int32_t> prompt(static_cast<size_t>(o.prompt_tokens));
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>((i * 7919 + 13) % c.vocab_size);

  // Warm-up: first touches of scratch buffers and the pool's threads; part
  // of what a server pays before its first answer.
  const auto t_warm = Clock::now();
  RL_RETURN_IF_ERROR(tf.ForwardSequence({prompt.data(), 1}, 0, cache, logits));
  const double warm_ms = MsSince(t_warm);
  r.load.name = "load";
  r.load.wall_ms = load_ms + warm_ms;
  {
    double accounted = 0;
    for (const auto& [stage, ms] : std::vector<std::pair<const char*, double>>{
             {"open + validate", lt.open_validate_ms},
             {"config + weight views", lt.weights_ms},
             {"tokenizer + template", lt.tokenizer_ms},
             {"repack (huge pages, panels)", lt.repack_ms},
             {"page in", lt.page_in_ms},
             {"first forward step (warm-up)", warm_ms}}) {
      r.load.rows.push_back({stage, ms, 0, 0, 0, 0});
      accounted += ms;
    }
    r.load.rows.push_back({"other (unaccounted)", r.load.wall_ms - accounted});
    for (ProfileRow& row : r.load.rows)
      row.share = r.load.wall_ms > 0 ? row.ms / r.load.wall_ms : 0;
  }

  std::vector<model::ForwardEvent> events;
  model::ForwardProfile prof;
  if (o.record_events) prof.events = &events;
  tf.set_profile(&prof);
  const auto t_prefill = Clock::now();
  RL_RETURN_IF_ERROR(tf.ForwardSequence(prompt, 0, cache, logits));
  const double prefill_ms = MsSince(t_prefill);
  r.prefill = MakePhase("prefill", o.prompt_tokens, prefill_ms, prof, {}, bw);

  const model::Tokenizer* tok = m.tokenizer();
  // One decode run of decode_tokens steps from the prompt's end; returns
  // its wall time and adds sampling/detokenize times when asked.
  auto decode = [&](double* sample_ms, double* detok_ms) -> Result<double> {
    int32_t next = model::Argmax(logits);
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < o.decode_tokens; ++i) {
      RL_RETURN_IF_ERROR(
          tf.ForwardSequence({&next, 1}, o.prompt_tokens + i, cache, logits));
      auto ts = Clock::now();
      next = model::Argmax(logits);
      if (sample_ms != nullptr) *sample_ms += MsSince(ts);
      if (tok != nullptr) {
        ts = Clock::now();
        std::string piece = tok->Decode({&next, 1});
        if (detok_ms != nullptr) *detok_ms += MsSince(ts);
        if (piece.size() > (size_t{1} << 20)) return Status::Internal("piece");
      }
    }
    return MsSince(t0);
  };
  prof.Clear();
  double sample_ms = 0, detok_ms = 0;
  auto decode_ms = decode(&sample_ms, &detok_ms);
  if (!decode_ms.ok()) return decode_ms.status();
  r.decode = MakePhase("decode", o.decode_tokens, *decode_ms, prof,
                       {{"sampling (argmax)", sample_ms},
                        {"detokenize", tok != nullptr ? detok_ms : 0}},
                       bw);
  r.events = std::move(events);
  r.events_dropped = prof.events_dropped;
  r.marks_per_decode_step =
      static_cast<double>(prof.marks) / static_cast<double>(o.decode_tokens);
  r.mark_ns = model::MeasureStageMarkNs();
  if (*decode_ms > 0) {
    const double step_ns = *decode_ms * 1e6 / o.decode_tokens;
    r.timer_cost_share = r.marks_per_decode_step * r.mark_ns / step_ns;
  }

  // Timer overhead: the same decode with the profile on and off,
  // interleaved in ABBA order so drift, and whatever favours the first or
  // the second run of a pair, hits both alike.
  std::vector<double> on, off;
  prof.events = nullptr;
  for (int rep = 0; rep < std::max(1, o.overhead_repeats); ++rep) {
    for (int k = 0; k < 2; ++k) {
      const bool profiled = (k == 1) == (rep % 2 == 0);
      tf.set_profile(profiled ? &prof : nullptr);
      auto t = decode(nullptr, nullptr);
      if (!t.ok()) return t.status();
      (profiled ? on : off).push_back(*t);
    }
  }
  tf.set_profile(nullptr);
  const double off_ms = Median(off);
  r.timer_overhead = off_ms > 0 ? (Median(on) - off_ms) / off_ms : 0;
  return r;
}

std::string ModelProfileResult::ToText() const {
  std::string out =
      fmt::format("redline profile: {} ({}, {}), {} threads, isa {}",
                  model_path, arch, weight_types, threads, isa);
  if (bandwidth.best_gbps() > 0)
    out +=
        fmt::format(", measured bandwidth {:.1f} GB/s", bandwidth.best_gbps());
  out += "\n";
  for (const ProfilePhase* ph : {&load, &prefill, &decode}) {
    out += fmt::format("\n{}: {:.2f} ms", ph->name, ph->wall_ms);
    if (ph->tokens > 0)
      out += fmt::format(" for {} tokens ({:.1f} tok/s)", ph->tokens,
                         ph->tok_per_s());
    out += "\n";
    out += fmt::format("  {:<30} {:>10} {:>7} {:>8} {:>9} {:>9}\n", "stage",
                       "ms", "%", "GB/s", "GFLOP/s", "roofline");
    for (const ProfileRow& r : ph->rows) {
      auto num = [](double v, const char* f) {
        return v > 0 ? fmt::format(fmt::runtime(f), v) : std::string("-");
      };
      out += fmt::format(
          "  {:<30} {:>10.3f} {:>6.1f}% {:>8} {:>9} {:>9}\n", r.stage, r.ms,
          100 * r.share, num(r.gbps, "{:.1f}"), num(r.gflops, "{:.1f}"),
          r.roofline > 0 ? fmt::format("{:.0f} %", 100 * r.roofline)
                         : std::string("-"));
    }
  }
  out += fmt::format(
      "\ntimer cost: {:.0f} stage marks per decode step x {:.1f} ns = "
      "{:.2f} us, {:.3f} % of a decode step (measured directly)\n",
      marks_per_decode_step, mark_ns, marks_per_decode_step * mark_ns / 1e3,
      100 * timer_cost_share);
  out += fmt::format(
      "timer overhead: {:+.2f} % of decode time (profiled vs not, median of "
      "interleaved runs; below the machine's run-to-run noise this is noise)\n",
      100 * timer_overhead);
  return out;
}

std::string ModelProfileResult::ToJson() const {
  std::string out = fmt::format(
      "{{\"model\":{},\"arch\":{},\"weight_types\":{},\"threads\":{},"
      "\"isa\":{},\"bandwidth_gbps\":{},\"timer_overhead\":{},"
      "\"marks_per_decode_step\":{},\"mark_ns\":{},\"timer_cost_share\":{},"
      "\"phases\":[",
      JsonQuote(model_path), JsonQuote(arch), JsonQuote(weight_types), threads,
      JsonQuote(isa), bandwidth.best_gbps(), timer_overhead,
      marks_per_decode_step, mark_ns, timer_cost_share);
  bool first_phase = true;
  for (const ProfilePhase* ph : {&load, &prefill, &decode}) {
    if (!first_phase) out += ',';
    first_phase = false;
    out +=
        fmt::format("{{\"name\":{},\"tokens\":{},\"wall_ms\":{},\"stages\":[",
                    JsonQuote(ph->name), ph->tokens, ph->wall_ms);
    for (size_t i = 0; i < ph->rows.size(); ++i) {
      const ProfileRow& r = ph->rows[i];
      if (i > 0) out += ',';
      out += fmt::format(
          "{{\"stage\":{},\"ms\":{},\"share\":{},\"gbps\":{},\"gflops\":{},"
          "\"roofline\":{}}}",
          JsonQuote(r.stage), r.ms, r.share, r.gbps, r.gflops, r.roofline);
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

}  // namespace redline::engine
