#include "model/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "base/utf8.h"

namespace redline::model::tokenizer_internal {
namespace {

// The split expressions, as the models' tokenizer.json files state them
// (Hugging Face runs them with Oniguruma; PCRE2 accepts the same syntax,
// including (?i:...), lookarounds and possessive quantifiers, so unlike
// llama.cpp's std::regex port no rewriting is needed).

// GPT-2 (openai/gpt-2 encoder.py), also the ByteLevel pre-tokenizer default.
constexpr const char* kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
// Llama 3 (tiktoken cl100k-style, digits in groups of up to three).
constexpr const char* kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Qwen2: as Llama 3 but every digit on its own.
constexpr const char* kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen35 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kDeepseekV3Main =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kPoro = R"re( ?[^(\s|.,!?…。，、।۔،)]+)re";
constexpr const char* kCjkDeepseek = R"re([一-龥ࠀ-一가-퟿]+)re";

struct Entry {
  std::vector<const char*> names;
  std::vector<const char*> patterns;
  bool ignore_merges = false;
  bool add_bos = false;
  bool no_bos = false;
  bool nfc = false;
};

// Names and expressions follow llama.cpp's llama-vocab.cpp (which names
// each `tokenizer.ggml.pre` its converter writes).
const std::vector<Entry>& Registry() {
  static const std::
      vector<Entry>
          registry =
              {
                  // llama.cpp's fallback for BPE vocabularies without a known
                  // pre.
                  {{"default"},
                   {R"re([\p{P}\$\+<=>\^~\|]+)re",
                    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re",
                    R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"}},
                  {{"gpt-2",
                    "gpt2",
                    "phi-2",
                    "mpt",
                    "olmo",
                    "jais",
                    "jina-es",
                    "jina-de",
                    "gigachat",
                    "jina-v2-es",
                    "jina-v2-de",
                    "jina-v1-en",
                    "jina-v2-code",
                    "roberta-bpe",
                    "a.x-4.0",
                    "mellum",
                    "modern-bert",
                    "trillion",
                    "granite-docling",
                    "exaone4"},
                   {kGpt2}},
                  {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1",
                    "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
                   {kLlama3},
                   /*ignore_merges=*/true,
                   /*add_bos=*/true},
                  {{"dbrx", "smaug-bpe"}, {kLlama3}},
                  {{"chatglm-bpe", "glm4"},
                   {kLlama3},
                   false,
                   false,
                   /*no_bos=*/true},
                  // Qwen's tokenizer.json normalizes to NFC before splitting.
                  {{"qwen2", "deepseek-r1-qwen"},
                   {kQwen2},
                   false,
                   false,
                   false,
                   /*nfc=*/true},
                  {{"kormo", "f2llmv2", "stablelm2", "hunyuan", "solar-open",
                    "megrez"},
                   {kQwen2}},
                  {{"qwen35"}, {kQwen35}, false, false, false, /*nfc=*/true},
                  // The letter class is the cased letters (Lu, Ll, Lt) of the
                  // original;
                  // six Greek Extended / letterlike code points are escaped
                  // because they
                  // have singleton canonical decompositions that text tools
                  // "normalize"
                  // into different (out-of-order) characters.
                  {{"deepseek-llm"},
                   {R"re([\r\n])re",
                    R"re(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\x{1F7D}ᾀ-ᾴᾶ-ᾼ\x{1FBE}ῂ-ῄῆ-ῌῐ-\x{1FD3}ῖ-\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\x{2126}ℨ\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)re",
                    R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re", R"re(\s+$)re",
                    kCjkDeepseek, R"re(\p{N}+)re"}},
                  {{"deepseek-coder"},
                   {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re",
                    kCjkDeepseek, R"re(\p{N})re"}},
                  {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
                   {R"re(\p{N}{1,3})re", R"re([一-龥぀-ゟ゠-ヿ]+)re",
                    kDeepseekV3Main}},
                  {{"spark2_5"},
                   {R"re(\p{N}{1,3})re", R"re([一-龥぀-ゟ゠-ヿ]+)re",
                    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re",
                    R"re(\p{N})re"}},
                  {{"falcon"},
                   {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2,
                    R"re([0-9][0-9][0-9])re"}},
                  {{"starcoder", "refact", "command-r", "smollm", "codeshell",
                    "exaone", "minerva-7b", "mellum2"},
                   {R"re(\p{N})re", kGpt2}},
                  {{"poro-chat", "bloom", "gpt3-finnish"}, {kPoro}},
                  {{"viking"}, {kPoro, R"re(\p{N})re"}},
                  {{"tekken"},
                   {R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
                   /*ignore_merges=*/true,
                   /*add_bos=*/true},
                  {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"},
                   {kGpt4o}},
                  {{"granite-embed-multi-97m"},
                   {R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
                   /*ignore_merges=*/true},
                  {{"tiny_aya", "cohere2moe"},
                   {R"re(\d{1,3}(?=(?:\d{3})*\b))re", kGpt4o}},
                  {{"bailingmoe", "bailingmoe2", "llada-moe"},
                   {R"re('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re"}},
                  {{"seed-coder"},
                   {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
                  {{"grok-2"}, {kQwen2}},
                  {{"ufakzeka"},
                   {R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
                  {{"laguna"}, {R"re([^\n]+|[\n]+)re", kQwen2}},
                  {{"minicpm5"},
                   {R"re(\p{N}{1,3})re",
                    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
                   /*ignore_merges=*/true},
                  {{"youtu"},
                   {R"re([가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+)re",
                    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
                   /*ignore_merges=*/true},
                  {{"exaone-moe"},
                   {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re"}},
                  {{"jais-2"}, {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re"}},
              };
  return registry;
}

}  // namespace

Result<PreTokenizerConfig> FindPreTokenizer(std::string_view pre) {
  const std::string_view key = pre.empty() ? std::string_view("default") : pre;
  for (const Entry& entry : Registry()) {
    for (const char* name : entry.names) {
      if (key != name) continue;
      PreTokenizerConfig config;
      config.name = std::string(key);
      config.patterns.assign(entry.patterns.begin(), entry.patterns.end());
      config.ignore_merges = entry.ignore_merges;
      config.add_bos = entry.add_bos;
      config.no_bos = entry.no_bos;
      config.nfc = entry.nfc;
      return config;
    }
  }
  return Status::NotFound(
      "unknown pre-tokenizer '" + std::string(pre) +
      "' (tokenizer.ggml.pre); known: see KnownPreTokenizers()");
}

std::vector<std::string> KnownPreTokenizers() {
  std::vector<std::string> names;
  for (const Entry& entry : Registry()) {
    for (const char* name : entry.names) names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// One compiled expression. pcre2_code is immutable after compilation and may
// be shared by threads; match data is per call.
struct PreTokenizer::Expression {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Expression() { pcre2_code_free(code); }
};

PreTokenizer::~PreTokenizer() = default;

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(
    const std::vector<std::string>& patterns) {
  std::unique_ptr<PreTokenizer> pre(new PreTokenizer());
  for (const std::string& pattern : patterns) {
    auto expr = std::make_unique<Expression>();
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    expr->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                               pattern.size(),
                               PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                               &error_code, &error_offset, nullptr);
    if (expr->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof(message));
      return Status::InvalidArgument("pre-tokenizer expression '" + pattern +
                                     "' does not compile at offset " +
                                     std::to_string(error_offset) + ": " +
                                     reinterpret_cast<const char*>(message));
    }
    // JIT is an optimization only: without it (unsupported CPU, no
    // executable memory) the interpreter gives the same matches.
    expr->jit = pcre2_jit_compile(expr->code, PCRE2_JIT_COMPLETE) == 0;
    pre->expressions_.push_back(std::move(expr));
  }
  return pre;
}

namespace {

// Match data sized for one match (ovector pair 0), reused per thread so a
// Split call does not allocate it.
struct MatchDataHolder {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  ~MatchDataHolder() { pcre2_match_data_free(data); }
};

pcre2_match_data* ThreadMatchData() {
  thread_local MatchDataHolder holder;
  return holder.data;
}

}  // namespace

void PreTokenizer::SplitOne(const Expression& expr, std::string_view text,
                            Span span, std::vector<Span>* out) const {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + span.offset);
  const size_t length = span.length;
  pcre2_match_data* md = ThreadMatchData();
  size_t pos = 0;   // where the next search starts
  size_t last = 0;  // end of the previous piece
  while (pos < length) {
    int rc = pcre2_match(expr.code, subject, length, pos, 0, md, nullptr);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && expr.jit) {
      // E.g. the JIT stack ran out on a pathological input: retry with the
      // interpreter, which backtracks on the heap.
      rc = pcre2_match(expr.code, subject, length, pos, PCRE2_NO_JIT, md,
                       nullptr);
    }
    if (rc < 0) break;  // no more matches (or an error): the rest is one piece
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0];
    const size_t end = ov[1];
    if (end <= start) {
      // An empty match splits nothing; step over one character.
      if (start >= length) break;
      pos = start +
            utf8::CharLength(
                std::string_view(text.data() + span.offset, length), start);
      continue;
    }
    if (start > last) {
      out->push_back(Span{span.offset + static_cast<uint32_t>(last),
                          static_cast<uint32_t>(start - last)});
    }
    out->push_back(Span{span.offset + static_cast<uint32_t>(start),
                        static_cast<uint32_t>(end - start)});
    last = pos = end;
  }
  if (last < length) {
    out->push_back(Span{span.offset + static_cast<uint32_t>(last),
                        static_cast<uint32_t>(length - last)});
  }
}

void PreTokenizer::Split(std::string_view text,
                         std::vector<Span>* pieces) const {
  pieces->clear();
  if (text.empty()) return;
  RL_DCHECK(text.size() < (1ull << 32));
  pieces->push_back(Span{0, static_cast<uint32_t>(text.size())});
  std::vector<Span> next;
  for (const auto& expr : expressions_) {
    next.clear();
    next.reserve(pieces->size() * 2);
    for (const Span& span : *pieces) SplitOne(*expr, text, span, &next);
    pieces->swap(next);
  }
}

}  // namespace redline::model::tokenizer_internal
