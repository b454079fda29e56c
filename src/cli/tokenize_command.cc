// redline tokenize: shows exactly which token ids a model receives for a
// text, using the vocabulary inside a GGUF file.
//
//   redline tokenize -m model.gguf "Hello world"          ids on one line
//   redline tokenize -m model.gguf --pieces --file in.txt  one token a line
//   echo -n "text" | redline tokenize -m model.gguf -
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>

#include "base/utf8.h"
#include "cli/command_registry.h"
#include "model/gguf/gguf.h"
#include "model/tokenizer/tokenizer.h"

namespace redline::cli {
namespace {

struct TokenizeFlags {
  std::string model;
  std::string text;
  std::string file;
  bool ids = false;
  bool pieces = false;
  bool no_add_special = false;
  bool parse_special = false;
  bool have_text = false;  // TEXT was given (it may be "")
};

// A piece quoted so that whitespace, control bytes and bytes that are not
// whole UTF-8 characters (a byte token's half of an emoji) stay visible.
std::string Quote(std::string_view piece) {
  std::string out = "'";
  for (size_t pos = 0; pos < piece.size();) {
    const size_t len = utf8::CharLength(piece, pos);
    const auto c = static_cast<unsigned char>(piece[pos]);
    if (len > 1) {
      out.append(piece.substr(pos, len));  // a whole non-ASCII character
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\' || c == '\'') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c >= 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
    pos += len;
  }
  out += "'";
  return out;
}

bool ReadInput(const TokenizeFlags& f, std::string* text) {
  if (!f.file.empty()) {
    std::ifstream in(f.file, std::ios::binary);
    if (!in) {
      fmt::print(stderr, "tokenize: cannot read {}\n", f.file);
      return false;
    }
    text->assign(std::istreambuf_iterator<char>(in),
                 std::istreambuf_iterator<char>());
    return true;
  }
  if (f.text == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    *text = ss.str();
    return true;
  }
  *text = f.text;
  return true;
}

int RunTokenize(const TokenizeFlags& f) {
  if (f.ids && f.pieces) {
    fmt::print(stderr, "tokenize: --ids and --pieces are exclusive\n");
    return 2;
  }
  if (!f.file.empty() && f.have_text) {
    fmt::print(
        stderr,
        "tokenize: give either TEXT (or - for stdin) or --file, not both\n");
    return 2;
  }
  if (f.file.empty() && !f.have_text) {
    fmt::print(
        stderr,
        "tokenize: nothing to tokenize: give TEXT, --file F, or - for stdin\n");
    return 2;
  }
  std::string text;
  if (!ReadInput(f, &text)) return 1;

  auto file =
      model::gguf::GgufFile::Open(f.model, /*require_supported_types=*/false);
  if (!file.ok()) {
    fmt::print(stderr, "tokenize: {}\n", file.status().ToString());
    return 1;
  }
  auto tokenizer = model::Tokenizer::FromGguf(*file);
  if (!tokenizer.ok()) {
    fmt::print(stderr, "tokenize: {}: {}\n", f.model,
               tokenizer.status().ToString());
    return 1;
  }
  const model::Tokenizer& tok = **tokenizer;
  const std::vector<int32_t> ids =
      tok.Encode(text, !f.no_add_special, f.parse_special);

  std::string out;
  if (f.pieces) {
    for (int32_t id : ids)
      out += fmt::format("{}\t{}\n", id, Quote(tok.TokenToPiece(id)));
  } else {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += std::to_string(ids[i]);
    }
    out.push_back('\n');
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

void Setup(CLI::App& sub, int* exit_code) {
  auto f = std::make_shared<TokenizeFlags>();
  sub.add_option("-m,--model", f->model,
                 "GGUF file with a vocabulary (vocab-only files work)")
      ->required();
  CLI::Option* text = sub.add_option(
      "text", f->text, "Text to tokenize, or - to read standard input");
  sub.add_option("-f,--file", f->file,
                 "Read the text from this file (raw bytes)");
  sub.add_flag("--ids", f->ids,
               "Print the ids space-separated on one line (the default)");
  sub.add_flag("--pieces", f->pieces,
               "Print one token per line: the id, a tab and the quoted piece");
  sub.add_flag(
      "--no-add-special", f->no_add_special,
      "Do not add BOS/EOS (or [CLS]/[SEP]) as the model's metadata asks");
  sub.add_flag("--parse-special", f->parse_special,
               "Treat special-token text such as <|im_start|> as those tokens");
  sub.callback([f, text, exit_code] {
    f->have_text = text->count() > 0;
    *exit_code = RunTokenize(*f);
  });
}

}  // namespace

RL_REGISTER_COMMAND(
    tokenize, "Show the token ids (or pieces) a model's tokenizer gives a text",
    Setup);

}  // namespace redline::cli
