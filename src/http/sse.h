// Server-sent events (text/event-stream) framing, both directions.
//
// SseParser turns a byte stream, fed in arbitrary pieces, into events as the
// WHATWG "event stream interpretation" describes: lines end with LF, CRLF or
// CR; "data:" lines are joined with '\n'; a blank line dispatches the event;
// lines starting with ':' are comments (keep-alive pings).
//
// Thread-safety: thread-compatible. Cost: no allocation per event in the
// steady state; partial lines are buffered and copied once.
#ifndef REDLINE_HTTP_SSE_H_
#define REDLINE_HTTP_SSE_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace redline::http {

struct SseEvent {
  enum class Kind { kData, kComment };
  Kind kind = Kind::kData;
  std::string_view event_type;  // "event:" field; empty means "message"
  std::string_view data;        // joined data lines, or the comment text
};

class SseParser {
 public:
  // Feeds bytes; calls on_event(const SseEvent&) for each complete event and
  // for each comment line. The views are valid only during the call.
  template <typename OnEvent>
  void Feed(std::string_view bytes, OnEvent&& on_event);

  // End of stream: dispatches an event whose data lines were complete but
  // that lacked the final blank line (lenient; many servers end with
  // "data: [DONE]\n"). Returns true when such an event was dispatched.
  template <typename OnEvent>
  bool Finish(OnEvent&& on_event);

  // Bytes seen so far that did not yet form a complete line.
  size_t pending_bytes() const { return line_.size(); }
  void Reset();

 private:
  // Processes one complete line (without its terminator).
  template <typename OnEvent>
  void Line(std::string_view line, OnEvent& on_event);

  std::string line_;        // partial line carried over between Feed calls
  std::string data_;        // data lines of the event being built
  std::string event_type_;  // "event:" of the event being built
  bool has_data_ = false;
  // The previous piece ended in CR; a leading LF belongs to it.
  bool skip_lf_ = false;
};

// Formats one data event ("data: <payload>\n\n"). The payload must not hold
// newlines (OpenAI chunks are one-line JSON).
std::string SseData(std::string_view payload);
// Formats a comment line (": <text>\n\n"), used as a keep-alive ping.
std::string SseComment(std::string_view text);

// ---- implementation ----

template <typename OnEvent>
void SseParser::Feed(std::string_view bytes, OnEvent&& on_event) {
  size_t pos = 0;
  if (skip_lf_ && !bytes.empty()) {
    if (bytes[0] == '\n') pos = 1;
    skip_lf_ = false;
  }
  while (pos < bytes.size()) {
    size_t end = bytes.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) {
      line_.append(bytes.data() + pos, bytes.size() - pos);
      return;
    }
    std::string_view piece = bytes.substr(pos, end - pos);
    if (!line_.empty()) {
      line_.append(piece.data(), piece.size());
      std::string whole;
      whole.swap(line_);
      Line(whole, on_event);
    } else {
      Line(piece, on_event);
    }
    if (bytes[end] == '\r') {
      if (end + 1 < bytes.size()) {
        if (bytes[end + 1] == '\n') ++end;
      } else {
        skip_lf_ = true;
      }
    }
    pos = end + 1;
  }
}

template <typename OnEvent>
bool SseParser::Finish(OnEvent&& on_event) {
  if (!line_.empty()) {
    std::string whole;
    whole.swap(line_);
    Line(whole, on_event);
  }
  if (!has_data_) return false;
  SseEvent event{SseEvent::Kind::kData, event_type_, data_};
  on_event(static_cast<const SseEvent&>(event));
  data_.clear();
  event_type_.clear();
  has_data_ = false;
  return true;
}

template <typename OnEvent>
void SseParser::Line(std::string_view line, OnEvent& on_event) {
  if (line.empty()) {
    if (has_data_) {
      SseEvent event{SseEvent::Kind::kData, event_type_, data_};
      on_event(static_cast<const SseEvent&>(event));
    }
    data_.clear();
    event_type_.clear();
    has_data_ = false;
    return;
  }
  if (line[0] == ':') {
    std::string_view text = line.substr(1);
    if (!text.empty() && text[0] == ' ') text.remove_prefix(1);
    SseEvent event{SseEvent::Kind::kComment, {}, text};
    on_event(static_cast<const SseEvent&>(event));
    return;
  }
  std::string_view field = line;
  std::string_view value;
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) data_ += '\n';
    data_.append(value.data(), value.size());
    has_data_ = true;
  } else if (field == "event") {
    event_type_.assign(value.data(), value.size());
  }
  // "id" and "retry" do not matter to an OpenAI client; unknown fields are
  // ignored as the specification requires.
}

}  // namespace redline::http

#endif  // REDLINE_HTTP_SSE_H_
