#include "model/tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "model/gguf/gguf.h"
#include "model/tokenizer/bpe.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/special_tokens.h"
#include "model/tokenizer/spm.h"
#include "model/tokenizer/unicode_data.h"
#include "model/tokenizer/vocab.h"
#include "model/tokenizer/wordpiece.h"

namespace redline::model {

using tokenizer_internal::BpeModel;
using tokenizer_internal::PreTokenizer;
using tokenizer_internal::Segment;
using tokenizer_internal::Span;
using tokenizer_internal::SpecialTokenMatcher;
using tokenizer_internal::SpmModel;
using tokenizer_internal::Vocab;
using tokenizer_internal::WordPieceModel;

namespace {

enum class Kind { kSpm, kBpe, kWpm };

// "▁" (U+2581): SentencePiece's visible space.
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

// Token texts llama.cpp treats as end-of-turn / end-of-generation markers
// when the metadata does not name them (llama-vocab.cpp, "auto-detect").
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // DeepSeek
    "<end_of_utterance>",
};
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
};
// FIM tokens: all are control tokens; pad/repo/file-separator end generation.
constexpr std::string_view kFimEogTexts[] = {
    "<|fim_pad|>",  "<fim-pad>",     "<fim_pad>",
    "<PAD>",        "[PAD]",  // pad
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
    "<REPO>",       "<reponame>",  // repo
    "<|file_sep|>",                // file sep
};
constexpr std::string_view kFimOtherTexts[] = {
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<PRE>",
    "\xE2\x96\x81<PRE>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<SUF>",
    "\xE2\x96\x81<SUF>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<MID>",
    "\xE2\x96\x81<MID>",
};

template <size_t N>
bool OneOf(std::string_view text, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), text) != std::end(list);
}

bool IsSpecialType(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUnknown ||
         t == TokenType::kUserDefined;
}

// Parses "<0xNN>" into its byte value; -1 if `text` is not of that form.
int ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>')
    return -1;
  int value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = text[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

std::string ReplaceAll(std::string_view text, std::string_view from,
                       std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace

class Tokenizer::Impl {
 public:
  Kind kind = Kind::kSpm;
  Vocab vocab;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> bpe;
  std::unique_ptr<SpmModel> spm;
  std::unique_ptr<WordPieceModel> wpm;
  // Control + unknown + user-defined tokens (parse_special) and user-defined
  // tokens only (always matched).
  std::unique_ptr<SpecialTokenMatcher> all_special;
  std::unique_ptr<SpecialTokenMatcher> user_defined;
  std::vector<std::string> pieces;  // TokenToPiece, special tokens rendered
  std::vector<uint8_t> is_eog;
  bool add_space_prefix = false;
  bool add_sep = false;
  bool nfc = false;  // normalize raw text to NFC first (Qwen)
  // Decode drops the leading space of the first piece (SentencePiece and
  // WordPiece, whose encodings introduce it).
  bool strip_first_space = false;

  void EncodeRaw(std::string_view text, bool prefix_space,
                 std::vector<int32_t>* ids) const;
};

void Tokenizer::Impl::EncodeRaw(std::string_view text, bool prefix_space,
                                std::vector<int32_t>* ids) const {
  switch (kind) {
    case Kind::kSpm: {
      thread_local std::string escaped;
      escaped.clear();
      if (prefix_space) escaped.append(kSpmSpace);
      for (char c : text) {
        if (c == ' ') {
          escaped.append(kSpmSpace);
        } else {
          escaped.push_back(c);
        }
      }
      spm->Encode(escaped, ids);
      break;
    }
    case Kind::kBpe: {
      thread_local std::vector<Span> words;
      pre_tokenizer->Split(text, &words);
      for (const Span& w : words)
        bpe->EncodeWord(text.substr(w.offset, w.length), ids);
      break;
    }
    case Kind::kWpm:
      wpm->Encode(text, ids);
      break;
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromSpec(TokenizerSpec spec) {
  auto impl = std::make_unique<Impl>();
  const size_t n = spec.tokens.size();
  if (n == 0) return Status::InvalidArgument("tokenizer vocabulary is empty");
  if (n >= static_cast<size_t>(INT32_MAX)) {
    return Status::InvalidArgument("tokenizer vocabulary too large");
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return Status::InvalidArgument(
        "tokenizer.ggml.scores has " + std::to_string(spec.scores.size()) +
        " entries for " + std::to_string(n) + " tokens");
  }
  if (!spec.types.empty() && spec.types.size() != n) {
    return Status::InvalidArgument(
        "tokenizer.ggml.token_type has " + std::to_string(spec.types.size()) +
        " entries for " + std::to_string(n) + " tokens");
  }

  // Model kind and llama.cpp's per-model defaults.
  int32_t bos = -1, eos = -1, unk = -1, sep = -1, pad = -1;
  bool add_bos = false, add_eos = false;
  tokenizer_internal::PreTokenizerConfig pre_config;
  if (spec.model == "llama") {
    impl->kind = Kind::kSpm;
    bos = 1, eos = 2, unk = 0;
    add_bos = true;
    impl->add_space_prefix = true;
    impl->strip_first_space = true;
  } else if (spec.model == "gpt2") {
    impl->kind = Kind::kBpe;
    auto config = tokenizer_internal::FindPreTokenizer(spec.pre);
    if (!config.ok()) return config.status();
    pre_config = std::move(config).value();
    add_bos = pre_config.add_bos;
    impl->nfc = pre_config.nfc;
  } else if (spec.model == "bert") {
    impl->kind = Kind::kWpm;
    bos = 101, unk = 100, sep = 102, pad = 0;
    add_bos = true;
    impl->add_sep = true;
    impl->strip_first_space = true;
  } else if (spec.model == "t5" || spec.model == "rwkv" ||
             spec.model == "plamo2" || spec.model == "gemma4" ||
             spec.model == "hybriddna" || spec.model == "whitespace" ||
             spec.model == "no_vocab" || spec.model == "none") {
    return Status::Unimplemented(
        "tokenizer model '" + spec.model +
        "' (tokenizer.ggml.model) is not supported; supported: "
        "llama, gpt2, bert");
  } else {
    return Status::InvalidArgument(
        "unknown tokenizer model '" + spec.model +
        "' (tokenizer.ggml.model); supported: llama, gpt2, bert");
  }
  if (spec.add_space_prefix.has_value())
    impl->add_space_prefix = *spec.add_space_prefix;

  impl->vocab.Build(std::move(spec.tokens), std::move(spec.scores),
                    std::move(spec.types));
  Vocab& vocab = impl->vocab;
  const int32_t size = vocab.size();

  // Special ids: defaults outside the vocabulary are dropped; metadata ids
  // outside it are ignored (both as llama.cpp does).
  auto resolve = [&](int32_t default_id, const std::optional<int32_t>& given) {
    int32_t id = vocab.IsValid(default_id) ? default_id : -1;
    if (given.has_value() && vocab.IsValid(*given)) id = *given;
    return id;
  };
  if (pre_config.no_bos) bos = -1;
  bos = resolve(bos, spec.bos_id);
  eos = resolve(eos, spec.eos_id);
  unk = resolve(unk, spec.unk_id);
  sep = resolve(sep, spec.sep_id);
  pad = resolve(pad, spec.pad_id);
  int32_t eot = resolve(-1, spec.eot_id);
  const int32_t eom = resolve(-1, spec.eom_id);
  if (spec.add_bos.has_value()) add_bos = *spec.add_bos;
  if (spec.add_eos.has_value()) add_eos = *spec.add_eos;
  if (add_bos && bos < 0) add_bos = false;
  if (add_eos && eos < 0) add_eos = false;

  // Auto-detection by text, as llama.cpp does: end markers and FIM tokens
  // become control tokens; EOG is the union of the markers and the ids.
  std::vector<uint8_t> eog(static_cast<size_t>(size), 0);
  bool found_eot_text = false;
  for (int32_t id = 0; id < size; ++id) {
    const std::string& text = vocab.text(id);
    const bool is_eot_text = OneOf(text, kEotTexts);
    const bool is_eog_text = OneOf(text, kEogTexts);
    const bool is_fim_eog = OneOf(text, kFimEogTexts);
    if (eot < 0 && is_eot_text && !found_eot_text) {
      eot = id;
      found_eot_text = true;
    }
    if (is_eot_text || is_eog_text || is_fim_eog ||
        OneOf(text, kFimOtherTexts)) {
      if (vocab.type(id) != TokenType::kControl)
        vocab.set_type(id, TokenType::kControl);
    }
    if (is_eog_text || is_fim_eog) eog[static_cast<size_t>(id)] = 1;
    // gpt-oss: these structural tokens are always rendered.
    if (text == "<|channel|>" || text == "<|message|>" || text == "<|start|>" ||
        text == "<|constrain|>") {
      vocab.set_type(id, TokenType::kUserDefined);
    }
  }
  for (int32_t id : {eos, eot, eom}) {
    if (id >= 0) eog[static_cast<size_t>(id)] = 1;
  }
  for (int32_t id : spec.extra_eog_ids) {
    if (vocab.IsValid(id)) eog[static_cast<size_t>(id)] = 1;
  }
  // gpt-oss / solar-open: with <|return|> and <|call|> present, <|end|>
  // separates messages and does not end generation.
  {
    const int32_t end_id = vocab.Find("<|end|>");
    const int32_t return_id = vocab.Find("<|return|>");
    const int32_t call_id = vocab.Find("<|call|>") >= 0
                                ? vocab.Find("<|call|>")
                                : vocab.Find("<|calls|>");
    const int32_t flush_id = vocab.Find("<|flush|>");
    if (end_id >= 0 && call_id >= 0 && (return_id >= 0 || flush_id >= 0)) {
      eog[static_cast<size_t>(end_id)] = 0;
      vocab.set_type(end_id, TokenType::kUserDefined);
    }
  }

  // Special-token matchers. Phi-3 strips whitespace after its special
  // tokens (llama.cpp's per-model RSTRIP attributes).
  std::string lower_name = spec.model_name;
  for (char& c : lower_name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool phi3 = lower_name.find("phi-3") != std::string::npos ||
                    lower_name.find("phi3") != std::string::npos;
  std::vector<SpecialTokenMatcher::Token> all_special, user_defined;
  for (int32_t id = 0; id < size; ++id) {
    const TokenType type = vocab.type(id);
    if (!IsSpecialType(type)) continue;
    SpecialTokenMatcher::Token token{vocab.text(id), id};
    if (phi3) {
      const std::string& text = vocab.text(id);
      token.rstrip =
          !(text == "<unk>" || text == "<s>" || text == "<|endoftext|>");
    }
    all_special.push_back(token);
    if (type == TokenType::kUserDefined) user_defined.push_back(token);
  }
  impl->all_special =
      std::make_unique<SpecialTokenMatcher>(std::move(all_special));
  impl->user_defined =
      std::make_unique<SpecialTokenMatcher>(std::move(user_defined));

  // Models.
  switch (impl->kind) {
    case Kind::kSpm:
      impl->spm = std::make_unique<SpmModel>(vocab, unk);
      break;
    case Kind::kBpe: {
      auto pre = PreTokenizer::Create(pre_config.patterns);
      if (!pre.ok()) return pre.status();
      impl->pre_tokenizer = std::move(pre).value();
      impl->bpe =
          BpeModel::Create(vocab, spec.merges, pre_config.ignore_merges);
      break;
    }
    case Kind::kWpm: {
      const bool lowercase = spec.lowercase.value_or(true);
      impl->wpm = std::make_unique<WordPieceModel>(
          vocab, unk, lowercase, spec.strip_accents.value_or(lowercase));
      break;
    }
  }

  // Pieces.
  impl->pieces.resize(static_cast<size_t>(size));
  for (int32_t id = 0; id < size; ++id) {
    const std::string& text = vocab.text(id);
    std::string& piece = impl->pieces[static_cast<size_t>(id)];
    switch (vocab.type(id)) {
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined:
        piece = text;
        break;
      case TokenType::kByte: {
        const int byte = ParseByteToken(text);
        if (byte >= 0) {
          piece.assign(1, static_cast<char>(byte));
        } else if (impl->kind == Kind::kBpe) {
          byte_level::Decode(text, &piece);
        } else {
          piece = text;
        }
        break;
      }
      case TokenType::kNormal:
        if (impl->kind == Kind::kBpe) {
          byte_level::Decode(text, &piece);
        } else {
          piece = ReplaceAll(text, kSpmSpace, " ");
        }
        break;
      case TokenType::kUnused:
      case TokenType::kUndefined:
        break;
    }
  }
  impl->is_eog = eog;

  std::unique_ptr<Tokenizer> tok(new Tokenizer(std::move(impl)));
  tok->model_ = spec.model;
  tok->pre_ = tok->impl_->kind == Kind::kBpe ? pre_config.name : std::string();
  tok->bos_id_ = bos;
  tok->eos_id_ = eos;
  tok->eot_id_ = eot;
  tok->unk_id_ = unk;
  tok->sep_id_ = sep;
  tok->pad_id_ = pad;
  tok->add_bos_ = add_bos;
  tok->add_eos_ = add_eos;
  for (int32_t id = 0; id < size; ++id) {
    if (eog[static_cast<size_t>(id)]) tok->eog_ids_.push_back(id);
  }
  return tok;
}

namespace {

// Reads an optional key: NotFound leaves *out unset, other errors propagate.
template <typename T, typename U>
Status ReadOptional(Result<U> result, std::optional<T>* out) {
  if (result.ok()) {
    *out = static_cast<T>(result.value());
    return Status::Ok();
  }
  if (result.status().code() == StatusCode::kNotFound) return Status::Ok();
  return result.status();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(
    const gguf::GgufFile& file) {
  TokenizerSpec spec;
  {
    auto model = file.GetString("tokenizer.ggml.model");
    if (!model.ok()) return model.status().WithContext("tokenizer");
    spec.model = std::move(model).value();
  }
  {
    auto pre = file.GetString("tokenizer.ggml.pre");
    if (pre.ok()) {
      spec.pre = std::move(pre).value();
    } else if (pre.status().code() != StatusCode::kNotFound) {
      return pre.status();
    }
  }
  {
    auto name = file.GetString("general.name");
    if (name.ok()) spec.model_name = std::move(name).value();
  }
  {
    auto tokens = file.GetStringArray("tokenizer.ggml.tokens");
    if (!tokens.ok()) return tokens.status().WithContext("tokenizer");
    spec.tokens = std::move(tokens).value();
  }
  {
    auto scores = file.GetFloatArray("tokenizer.ggml.scores");
    if (scores.ok()) {
      spec.scores = std::move(scores).value();
    } else if (scores.status().code() != StatusCode::kNotFound) {
      return scores.status();
    }
  }
  {
    auto types = file.GetIntArray("tokenizer.ggml.token_type");
    if (types.ok()) {
      spec.types.reserve(types->size());
      for (int64_t t : *types) {
        spec.types.push_back(t >= 0 && t <= 6 ? static_cast<TokenType>(t)
                                              : TokenType::kUndefined);
      }
    } else if (types.status().code() != StatusCode::kNotFound) {
      return types.status();
    }
  }
  if (spec.model == "gpt2") {
    auto merges = file.GetStringArray("tokenizer.ggml.merges");
    if (!merges.ok())
      return merges.status().WithContext("BPE tokenizer needs merges");
    spec.merges = std::move(merges).value();
  }
  struct IdKey {
    const char* key;
    std::optional<int32_t>* out;
  };
  const IdKey id_keys[] = {
      {"tokenizer.ggml.bos_token_id", &spec.bos_id},
      {"tokenizer.ggml.eos_token_id", &spec.eos_id},
      {"tokenizer.ggml.unknown_token_id", &spec.unk_id},
      {"tokenizer.ggml.seperator_token_id", &spec.sep_id},
      {"tokenizer.ggml.padding_token_id", &spec.pad_id},
      {"tokenizer.ggml.eot_token_id", &spec.eot_id},
      {"tokenizer.ggml.eom_token_id", &spec.eom_id},
  };
  for (const IdKey& k : id_keys) {
    auto value = file.GetInt(k.key);
    if (value.ok() && (*value < 0 || *value > INT32_MAX))
      continue;  // ignored like out-of-range
    RL_RETURN_IF_ERROR(ReadOptional(std::move(value), k.out));
  }
  if (spec.model == "bert" && !spec.bos_id.has_value()) {
    auto cls = file.GetInt("tokenizer.ggml.cls_token_id");
    if (cls.ok() && *cls >= 0 && *cls <= INT32_MAX)
      spec.bos_id = static_cast<int32_t>(*cls);
  }
  for (const char* key :
       {"tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id",
        "tokenizer.ggml.fim_sep_token_id"}) {
    auto value = file.GetInt(key);
    if (value.ok() && *value >= 0 && *value <= INT32_MAX) {
      spec.extra_eog_ids.push_back(static_cast<int32_t>(*value));
    }
  }
  RL_RETURN_IF_ERROR(ReadOptional(file.GetBool("tokenizer.ggml.add_bos_token"),
                                  &spec.add_bos));
  RL_RETURN_IF_ERROR(ReadOptional(file.GetBool("tokenizer.ggml.add_eos_token"),
                                  &spec.add_eos));
  RL_RETURN_IF_ERROR(ReadOptional(
      file.GetBool("tokenizer.ggml.add_space_prefix"), &spec.add_space_prefix));
  RL_RETURN_IF_ERROR(ReadOptional(
      file.GetBool("tokenizer.ggml.normalizer.lowercase"), &spec.lowercase));
  RL_RETURN_IF_ERROR(
      ReadOptional(file.GetBool("tokenizer.ggml.normalizer.strip_accents"),
                   &spec.strip_accents));
  return FromSpec(std::move(spec));
}

void Tokenizer::EncodeAppend(std::string_view text, bool add_special,
                             bool parse_special,
                             std::vector<int32_t>* ids) const {
  const Impl& impl = *impl_;
  const bool bos = add_special && add_bos_ && bos_id_ >= 0;
  if (bos) ids->push_back(bos_id_);

  thread_local std::vector<Segment> segments;
  segments.clear();
  const SpecialTokenMatcher& matcher =
      parse_special ? *impl.all_special : *impl.user_defined;
  if (matcher.empty()) {
    if (!text.empty()) segments.push_back(Segment{-1, text});
  } else {
    matcher.Split(text, &segments);
  }
  // SentencePiece adds the space prefix to the first text and to text that
  // follows a special token (llama.cpp's behaviour).
  bool prev_special = true;
  for (const Segment& s : segments) {
    if (s.token >= 0) {
      ids->push_back(s.token);
      prev_special = true;
    } else {
      std::string_view raw = s.text;
      thread_local std::string normalized;
      if (impl.nfc && unicode_data::MayNeedNfc(raw)) {
        normalized.clear();
        unicode_data::AppendNfc(raw, &normalized);
        raw = normalized;
      }
      impl.EncodeRaw(raw, impl.add_space_prefix && prev_special, ids);
      prev_special = false;
    }
  }

  if (add_special) {
    if (add_eos_ && eos_id_ >= 0) ids->push_back(eos_id_);
    if (impl.add_sep && sep_id_ >= 0) ids->push_back(sep_id_);
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  EncodeAppend(text, add_special, parse_special, &ids);
  return ids;
}

void Tokenizer::AppendPiece(int32_t id, bool skip_special, bool* at_start,
                            std::string* out) const {
  const Impl& impl = *impl_;
  if (!impl.vocab.IsValid(id)) return;
  if (skip_special) {
    const TokenType type = impl.vocab.type(id);
    if (type == TokenType::kControl || type == TokenType::kUnknown) return;
  }
  const std::string& piece = impl.pieces[static_cast<size_t>(id)];
  if (piece.empty()) return;
  if (*at_start) {
    *at_start = false;
    if (impl.strip_first_space && piece[0] == ' ') {
      out->append(piece, 1, std::string::npos);
      return;
    }
  }
  out->append(piece);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special,
                              bool continuation) const {
  std::string out;
  bool at_start = !continuation;
  for (int32_t id : ids) AppendPiece(id, skip_special, &at_start, &out);
  return out;
}

const std::string& Tokenizer::TokenToPiece(int32_t id) const {
  static const std::string kEmpty;
  return impl_->vocab.IsValid(id) ? impl_->pieces[static_cast<size_t>(id)]
                                  : kEmpty;
}

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  return impl_->vocab.IsValid(id) ? impl_->vocab.text(id) : kEmpty;
}

TokenType Tokenizer::token_type(int32_t id) const {
  return impl_->vocab.IsValid(id) ? impl_->vocab.type(id)
                                  : TokenType::kUndefined;
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab.size(); }

bool Tokenizer::IsEog(int32_t id) const {
  return impl_->vocab.IsValid(id) &&
         impl_->is_eog[static_cast<size_t>(id)] != 0;
}

std::optional<int32_t> Tokenizer::FindToken(std::string_view text) const {
  const int32_t id = impl_->vocab.Find(text);
  if (id < 0) return std::nullopt;
  return id;
}

}  // namespace redline::model
