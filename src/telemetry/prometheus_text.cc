#include "telemetry/prometheus_text.h"

#include <charconv>
#include <cmath>

namespace redline::telemetry {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' ||
                        s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' ||
                        s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A finite number, the whole of `text`.
bool ParseNumber(std::string_view text, double* out) {
  text = Trim(text);
  if (text.empty()) return false;
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() ||
      !std::isfinite(v))
    return false;
  *out = v;
  return true;
}

}  // namespace

std::vector<PromSample> ParsePrometheusText(std::string_view text,
                                            int* malformed) {
  std::vector<PromSample> out;
  int bad = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = Trim(text.substr(0, nl));
    text =
        nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line[0] == '#') continue;
    PromSample s;
    size_t name_end = line.find_first_of("{ \t");
    if (name_end == std::string_view::npos || name_end == 0) {
      bad++;
      continue;
    }
    s.name = std::string(line.substr(0, name_end));
    std::string_view rest = line.substr(name_end);
    if (!rest.empty() && rest[0] == '{') {
      // Label values may contain '}' inside quotes.
      size_t i = 1;
      bool quoted = false;
      for (; i < rest.size(); ++i) {
        if (rest[i] == '\\' && quoted) {
          ++i;
          continue;
        }
        if (rest[i] == '"') quoted = !quoted;
        if (rest[i] == '}' && !quoted) break;
      }
      if (i >= rest.size()) {
        bad++;
        continue;
      }
      s.labels = std::string(rest.substr(1, i - 1));
      rest = rest.substr(i + 1);
    }
    rest = Trim(rest);
    size_t sp = rest.find_first_of(" \t");
    std::string_view value =
        sp == std::string_view::npos ? rest : rest.substr(0, sp);
    if (value == "NaN") {
      s.value = std::nan("");
    } else if (value == "+Inf") {
      s.value = INFINITY;
    } else if (value == "-Inf") {
      s.value = -INFINITY;
    } else {
      if (!ParseNumber(value, &s.value)) {
        bad++;
        continue;
      }
    }
    out.push_back(std::move(s));
  }
  if (malformed) *malformed = bad;
  return out;
}

std::vector<std::pair<std::string, std::string>> ParseLabels(
    std::string_view labels) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  while (i < labels.size()) {
    while (i < labels.size() && (labels[i] == ',' || labels[i] == ' ')) ++i;
    const size_t eq = labels.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= labels.size() ||
        labels[eq + 1] != '"')
      break;
    std::string key(Trim(labels.substr(i, eq - i)));
    if (key.empty()) break;  // `="x"`: no label name
    std::string value;
    size_t j = eq + 2;
    for (; j < labels.size() && labels[j] != '"'; ++j) {
      if (labels[j] == '\\' && j + 1 < labels.size()) {
        ++j;
        value.push_back(labels[j] == 'n' ? '\n' : labels[j]);
      } else {
        value.push_back(labels[j]);
      }
    }
    if (j >= labels.size()) break;  // unterminated value
    out.emplace_back(std::move(key), std::move(value));
    i = j + 1;
  }
  return out;
}

}  // namespace redline::telemetry
