// PreTokenizer: splits text into the "words" that byte-level BPE merges
// within, using the split expressions a model's `tokenizer.ggml.pre` names.
//
// Semantics follow Hugging Face tokenizers' `Split(pattern, "isolated")` and
// llama.cpp's `unicode_regex_split`: the expressions are applied in order; each
// one splits every current piece into its matches and the text between them
// (both kept, nothing dropped), and the next expression sees those pieces.
// Expressions run through PCRE2 with UTF + UCP (\p{L}, \s, \d are Unicode
// aware) and PCRE2_MATCH_INVALID_UTF, so malformed UTF-8 never fails a match:
// invalid bytes simply end up in the pieces between matches. Each piece is a
// separate subject, so anchors and lookarounds see piece boundaries, as in
// Hugging Face.
//
// Ownership: owns the compiled expressions. Thread-safety: immutable after
// Create; Split may be called concurrently (match state is per call).
// Cost: Create compiles (and JIT-compiles) every expression, ~1 ms.
#ifndef REDLINE_MODEL_TOKENIZER_PRE_TOKENIZER_H_
#define REDLINE_MODEL_TOKENIZER_PRE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace redline::model::tokenizer_internal {

// What a `tokenizer.ggml.pre` value implies for a byte-level BPE vocabulary.
struct PreTokenizerConfig {
  std::string name;                   // canonical name used in messages
  std::vector<std::string> patterns;  // applied in order
  // A word that is itself a token is emitted as is, without merges
  // (Hugging Face `ignore_merges`; Llama 3 and a few others).
  bool ignore_merges = false;
  // llama.cpp's per-model default for adding BOS when the GGUF has no
  // tokenizer.ggml.add_bos_token.
  bool add_bos = false;
  // The model has no BOS token by default (e.g. chatglm-bpe).
  bool no_bos = false;
  // Text is normalized to Unicode NFC first (Hugging Face's "NFC"
  // normalizer, used by Qwen). llama.cpp skips this step; the two differ
  // only on text that is not already NFC (e.g. decomposed accents).
  bool nfc = false;
};

// Looks up the configuration for a `tokenizer.ggml.pre` value. An empty
// `pre` (key absent) and "default" give llama.cpp's default expressions.
// NotFound names the unknown value.
Result<PreTokenizerConfig> FindPreTokenizer(std::string_view pre);

// Every `pre` value FindPreTokenizer accepts (for messages and tests).
std::vector<std::string> KnownPreTokenizers();

// A byte range of the input text.
struct Span {
  uint32_t offset;
  uint32_t length;
};

class PreTokenizer {
 public:
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Compiles the expressions. InvalidArgument names an expression PCRE2
  // rejects and the reason.
  static Result<std::unique_ptr<PreTokenizer>> Create(
      const std::vector<std::string>& patterns);

  // Replaces *pieces with the pieces of `text` (spans relative to `text`, in
  // order, covering it exactly; empty text gives no pieces). `text` must be
  // shorter than 4 GiB.
  void Split(std::string_view text, std::vector<Span>* pieces) const;

 private:
  struct Expression;
  PreTokenizer() = default;
  // Splits text[span] by one expression and appends the pieces to *out.
  void SplitOne(const Expression& expr, std::string_view text, Span span,
                std::vector<Span>* out) const;

  std::vector<std::unique_ptr<Expression>> expressions_;
};

}  // namespace redline::model::tokenizer_internal

#endif  // REDLINE_MODEL_TOKENIZER_PRE_TOKENIZER_H_
