// Tokenizer: text <-> token ids, exactly as the model was trained, built from
// the vocabulary stored in a GGUF file (tokenizer.ggml.* metadata).
//
// Supported `tokenizer.ggml.model` values:
//   "llama"  SentencePiece BPE: score-driven bigram merges over characters,
//            "▁" for spaces, a space prefix (tokenizer.ggml.add_space_prefix,
//            default true), byte fallback to <0xNN> tokens, else the unknown
//            token. Works for any vocabulary (e.g. synthetic ones).
//   "gpt2"   Byte-level BPE: the text is split by the expressions that
//            tokenizer.ggml.pre names (see pre_tokenizer.h; absent means
//            llama.cpp's "default"), each piece is mapped to the GPT-2 byte
//            alphabet and merged by rank (tokenizer.ggml.merges). Qwen
//            vocabularies ("qwen2", "deepseek-r1-qwen", "qwen35") first
//            normalize the text to NFC, as their Hugging Face tokenizers do.
//   "bert"   WordPiece with BERT normalization (lower-casing, accent
//            stripping, punctuation and CJK splitting), for vocabularies
//            converted by llama.cpp (word-initial pieces start with "▁").
// Anything else is an error that names the value.
//
// Special tokens: control, unknown and user-defined tokens (token types 3, 2,
// 4) are matched in the input text before any splitting, leftmost-longest
// first (as Hugging Face's added-token matcher does). Control and unknown
// tokens are matched only when the caller passes parse_special (chat
// templates do); otherwise their text is ordinary text. User-defined tokens
// (e.g. Qwen's <think>) are always matched, as in Hugging Face and llama.cpp.
//
// Decoding concatenates each token's piece (TokenToPiece). For "llama" and
// "bert" vocabularies the space that the space prefix introduced is removed
// from the first piece that produces text, so Decode(Encode(s)) == s for
// lossless tokenizers. No other clean-up (Hugging Face's
// clean_up_tokenization_spaces) is applied, so decoding stays byte-exact and
// incremental decoding can match it.
//
// Ownership: a Tokenizer owns copies of everything it needs; the GgufFile may
// be closed after FromGguf. Thread-safety: immutable after creation except
// for an internal, internally synchronized word cache; every method is const
// and may be called concurrently. Cost: FromGguf is O(vocabulary + merges)
// (~50-150 ms for 100k-token vocabularies); Encode is linear in the text
// (tens of MB/s); Decode is linear in the output.
#ifndef REDLINE_MODEL_TOKENIZER_TOKENIZER_H_
#define REDLINE_MODEL_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace redline::model {

namespace gguf {
class GgufFile;
}  // namespace gguf

// tokenizer.ggml.token_type values.
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Everything a Tokenizer is built from. FromGguf fills it from the metadata;
// tests and synthetic models may fill it directly. Absent optionals take the
// per-model defaults llama.cpp uses.
struct TokenizerSpec {
  std::string model;                     // tokenizer.ggml.model
  std::string pre;                       // tokenizer.ggml.pre; "" when absent
  std::vector<std::string> tokens;       // tokenizer.ggml.tokens, index = id
  std::vector<float> scores;             // empty (all 0) or one per token
  std::vector<TokenType> types;          // empty (all normal) or one per token
  std::vector<std::string> merges;       // "left right", rank order ("gpt2")
  std::optional<int32_t> bos_id;         // tokenizer.ggml.bos_token_id
  std::optional<int32_t> eos_id;         // tokenizer.ggml.eos_token_id
  std::optional<int32_t> unk_id;         // tokenizer.ggml.unknown_token_id
  std::optional<int32_t> sep_id;         // tokenizer.ggml.seperator_token_id
  std::optional<int32_t> pad_id;         // tokenizer.ggml.padding_token_id
  std::optional<int32_t> eot_id;         // tokenizer.ggml.eot_token_id
  std::optional<int32_t> eom_id;         // tokenizer.ggml.eom_token_id
  std::vector<int32_t> extra_eog_ids;    // e.g. FIM pad/repo/sep from metadata
  std::optional<bool> add_bos;           // tokenizer.ggml.add_bos_token
  std::optional<bool> add_eos;           // tokenizer.ggml.add_eos_token
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix
  // "bert": tokenizer.ggml.normalizer.lowercase (default true) and
  // .strip_accents (default: as lowercase).
  std::optional<bool> lowercase;
  std::optional<bool> strip_accents;
  std::string model_name;  // general.name (a few per-model quirks)
};

class Tokenizer {
 public:
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Builds the tokenizer from a GGUF file's tokenizer.ggml.* metadata
  // (vocab-only files work). Errors: NotFound (tokenizer.ggml.model or
  // .tokens absent; unknown tokenizer.ggml.pre, named), InvalidArgument
  // (unknown tokenizer.ggml.model, named; array lengths disagree; mistyped
  // keys), Unimplemented (a known llama.cpp model this build does not
  // support, e.g. "t5", named).
  static Result<std::unique_ptr<Tokenizer>> FromGguf(
      const gguf::GgufFile& file);
  // Same from an explicit spec (same errors).
  static Result<std::unique_ptr<Tokenizer>> FromSpec(TokenizerSpec spec);

  // Token ids for `text`. add_special: prepend BOS / append EOS as
  // add_bos()/add_eos() say ("bert": [CLS] ... [SEP]). parse_special: see
  // the file comment. Any bytes are accepted: malformed UTF-8 is tokenized
  // through byte tokens where the vocabulary has them, never a crash.
  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const;
  // As Encode, appending to *ids (lets callers reuse a buffer).
  void EncodeAppend(std::string_view text, bool add_special, bool parse_special,
                    std::vector<int32_t>* ids) const;

  // The text of `ids`. skip_special drops control and unknown tokens (BOS,
  // EOS, <|im_end|>, ...); otherwise they appear as their text. Ids outside
  // the vocabulary contribute nothing. The result is raw bytes: it is valid
  // UTF-8 unless the ids spell invalid byte sequences.
  // continuation: the ids continue earlier text (e.g. tokens generated after
  // a prompt), so the first piece keeps its leading space ("▁time" after
  // "Once upon a" decodes to " time", not "time").
  std::string Decode(std::span<const int32_t> ids, bool skip_special = false,
                     bool continuation = false) const;

  // The bytes this token contributes to decoded text: byte tokens give their
  // byte, "▁" becomes a space ("llama", "bert"), byte-level text becomes raw
  // bytes ("gpt2"), control tokens give their text, unused tokens nothing.
  // Empty for invalid ids. (Decode may additionally drop the leading space
  // of the first piece; see the file comment.)
  const std::string& TokenToPiece(int32_t id) const;
  // The vocabulary string of `id` as stored in the file; empty for invalid ids.
  const std::string& TokenText(int32_t id) const;
  // kUndefined for invalid ids.
  TokenType token_type(int32_t id) const;

  int64_t vocab_size() const;
  int32_t bos_id() const { return bos_id_; }  // -1 if none
  int32_t eos_id() const { return eos_id_; }  // -1 if none
  int32_t eot_id() const { return eot_id_; }  // -1 if none
  int32_t unk_id() const { return unk_id_; }  // -1 if none
  int32_t sep_id() const { return sep_id_; }  // -1 if none
  int32_t pad_id() const { return pad_id_; }  // -1 if none

  // End-of-generation tokens, as llama.cpp determines them: EOS, EOT, EOM,
  // tokens whose text is one of the known end markers (<|eot_id|>,
  // <|im_end|>, <|end|>, <|endoftext|>, <end_of_turn>, <|end_of_text|>, ...)
  // and FIM pad/repo/file-separator tokens. Sorted ascending.
  bool IsEog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

  // Whether Encode(add_special=true) prepends BOS / appends EOS.
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }

  // The id of the token whose vocabulary text is exactly `text`.
  std::optional<int32_t> FindToken(std::string_view text) const;

  // "llama", "gpt2" or "bert", and the pre-tokenizer name ("" if not BPE).
  const std::string& model() const { return model_; }
  const std::string& pre() const { return pre_; }

 private:
  class Impl;
  friend class StreamingDetokenizer;
  explicit Tokenizer(std::unique_ptr<Impl> impl);

  // Appends the piece of `id` to *out, applying skip_special and the
  // leading-space rule. *at_start is true until a piece produced output.
  void AppendPiece(int32_t id, bool skip_special, bool* at_start,
                   std::string* out) const;

  std::unique_ptr<Impl> impl_;
  std::string model_;
  std::string pre_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t eot_id_ = -1;
  int32_t unk_id_ = -1;
  int32_t sep_id_ = -1;
  int32_t pad_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  std::vector<int32_t> eog_ids_;
};

// Incremental detokenization for streaming. Push returns the text that is
// complete after one more token; a chunk never ends inside a UTF-8
// character (bytes of an unfinished character wait for the next tokens).
// The concatenation of every Push and the final Flush equals
// tokenizer.Decode(all ids, skip_special, continuation). Bytes that can never
// form a valid character are passed through rather than held back forever.
//
// Ownership: borrows the tokenizer, which must outlive it. Thread-safety:
// thread-compatible (one per stream). Cost: O(piece length) per Push.
class StreamingDetokenizer {
 public:
  // continuation: as in Tokenizer::Decode (a stream of generated tokens
  // that continues a prompt keeps the first piece's leading space).
  explicit StreamingDetokenizer(const Tokenizer& tokenizer,
                                bool skip_special = false,
                                bool continuation = false);

  // Adds one token; returns the newly completed text (possibly empty).
  std::string Push(int32_t id);
  // Returns whatever is still held back (an unfinished character at the end
  // of the stream) and resets the detokenizer for a new stream (with the
  // same settings).
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool continuation_;
  bool at_start_;
  std::string pending_;  // bytes of an unfinished UTF-8 character (<= 3)
};

}  // namespace redline::model

#endif  // REDLINE_MODEL_TOKENIZER_TOKENIZER_H_
