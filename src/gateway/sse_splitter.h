// SseSplitter: cuts an upstream's event stream at event boundaries without
// re-framing it, so the gateway forwards the upstream's bytes verbatim yet
// never stops (or injects an error event) in the middle of an event.
//
// A boundary is a blank line: a line terminator ("\n", "\r\n" or "\r", as
// the SSE specification allows) directly after another one. Bytes after the
// last boundary wait for the next piece.
//
// Thread-safety: thread-compatible. Cost: one scan and one copy of each
// byte; the waiting tail is bounded by the caller (pending_bytes()).
#ifndef REDLINE_GATEWAY_SSE_SPLITTER_H_
#define REDLINE_GATEWAY_SSE_SPLITTER_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace redline::gateway {

class SseSplitter {
 public:
  // Appends `bytes` and calls on_event(std::string_view raw) for each
  // complete event, terminator included (the view lives during the call).
  template <typename OnEvent>
  void Feed(std::string_view bytes, OnEvent&& on_event);

  // Appends `bytes` and returns every complete event as one string (empty
  // when none is complete yet), keeping the incomplete tail.
  std::string TakeComplete(std::string_view bytes);

  // Incomplete bytes waiting for a boundary.
  size_t pending_bytes() const { return buf_.size(); }
  // Returns and clears the incomplete tail.
  std::string TakeRest();

 private:
  // Absolute end (exclusive) in buf_ of the next complete event whose
  // bytes begin at or after earlier ends; npos when none is complete.
  size_t NextEnd();

  std::string buf_;
  size_t scan_ = 0;         // next byte of buf_ to look at
  bool line_start_ = true;  // scan_ is at the start of a line
  bool skip_lf_ = false;    // a CR ended the last line; an LF may follow
};

template <typename OnEvent>
void SseSplitter::Feed(std::string_view bytes, OnEvent&& on_event) {
  buf_.append(bytes.data(), bytes.size());
  size_t start = 0;
  for (size_t end = NextEnd(); end != std::string::npos; end = NextEnd()) {
    on_event(std::string_view(buf_).substr(start, end - start));
    start = end;
  }
  buf_.erase(0, start);
  scan_ -= start;
}

}  // namespace redline::gateway

#endif  // REDLINE_GATEWAY_SSE_SPLITTER_H_
