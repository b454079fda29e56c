#include "http/sse.h"

namespace redline::http {

void SseParser::Reset() {
  line_.clear();
  data_.clear();
  event_type_.clear();
  has_data_ = false;
  skip_lf_ = false;
}

std::string SseData(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  out += "data: ";
  out.append(payload.data(), payload.size());
  out += "\n\n";
  return out;
}

std::string SseComment(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 4);
  out += ": ";
  out.append(text.data(), text.size());
  out += "\n\n";
  return out;
}

}  // namespace redline::http
