#include "bench/config_echo.h"

#include <cctype>
#include <fstream>
#include <iterator>

namespace redline::bench {

std::string_view LengthDistKindName(LengthDist::Kind kind) {
  switch (kind) {
    case LengthDist::Kind::kFixed:
      return "fixed";
    case LengthDist::Kind::kUniform:
      return "uniform";
    case LengthDist::Kind::kNormal:
      return "normal";
    case LengthDist::Kind::kLognormal:
      return "lognormal";
  }
  return "fixed";
}

std::vector<std::string> ProcessArgv() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  if (!f) return {};
  // Bounded: a command line longer than this is cut (ARG_MAX is larger, but
  // the echo is for people reading the JSON).
  constexpr size_t kMaxBytes = 64 << 10;
  std::string all;
  char c;
  while (all.size() < kMaxBytes && f.get(c)) all.push_back(c);
  std::vector<std::string> out;
  std::string cur;
  for (char ch : all) {
    if (ch == '\0') {
      out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(ch);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

namespace {

bool IsSecretHeader(std::string_view header) {
  const size_t colon = header.find(':');
  std::string name(header.substr(0, colon));
  for (char& c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!name.empty() && name.back() == ' ') name.pop_back();
  return colon != std::string_view::npos &&
         (name == "authorization" || name == "api-key" || name == "x-api-key" ||
          name == "proxy-authorization");
}

std::string MaskHeader(std::string_view header) {
  return std::string(header.substr(0, header.find(':'))) + ": ***";
}

}  // namespace

std::vector<std::string> RedactArgv(std::vector<std::string> argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string& a = argv[i];
    if (a == "--api-key" && i + 1 < argv.size()) {
      argv[++i] = "***";
    } else if (a.rfind("--api-key=", 0) == 0) {
      a = "--api-key=***";
    } else if ((a == "-H" || a == "--header") && i + 1 < argv.size()) {
      if (IsSecretHeader(argv[i + 1])) argv[i + 1] = MaskHeader(argv[i + 1]);
      ++i;
    } else if (a.rfind("--header=", 0) == 0 && IsSecretHeader(a.substr(9))) {
      a = "--header=" + MaskHeader(a.substr(9));
    }
  }
  return argv;
}

std::string_view ToolVersion() {
#ifdef REDLINE_VERSION
  return REDLINE_VERSION;
#else
  return "unknown";
#endif
}

}  // namespace redline::bench
