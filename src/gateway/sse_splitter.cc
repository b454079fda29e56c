#include "gateway/sse_splitter.h"

namespace redline::gateway {

size_t SseSplitter::NextEnd() {
  while (scan_ < buf_.size()) {
    const char c = buf_[scan_];
    if (skip_lf_) {
      skip_lf_ = false;
      if (c == '\n') {  // the LF of a CRLF whose CR ended a line
        ++scan_;
        continue;
      }
    }
    if (c != '\n' && c != '\r') {
      line_start_ = false;
      ++scan_;
      continue;
    }
    const bool blank = line_start_;
    ++scan_;
    line_start_ = true;
    if (c == '\r') {
      if (scan_ == buf_.size()) {
        // Cannot tell yet whether an LF completes this CRLF; a blank line
        // waits for the next byte so the LF stays with its event.
        if (blank) {
          --scan_;
          line_start_ = true;
          return std::string::npos;
        }
        skip_lf_ = true;
        continue;
      }
      if (buf_[scan_] == '\n') ++scan_;
    }
    if (blank) return scan_;
  }
  return std::string::npos;
}

std::string SseSplitter::TakeComplete(std::string_view bytes) {
  buf_.append(bytes.data(), bytes.size());
  size_t last = 0;
  for (size_t end = NextEnd(); end != std::string::npos; end = NextEnd())
    last = end;
  if (last == 0) return {};
  std::string out;
  if (last == buf_.size()) {
    out.swap(buf_);
  } else {
    out.assign(buf_, 0, last);
    buf_.erase(0, last);
  }
  scan_ -= last;
  return out;
}

std::string SseSplitter::TakeRest() {
  std::string out;
  out.swap(buf_);
  scan_ = 0;
  line_start_ = true;
  skip_lf_ = false;
  return out;
}

}  // namespace redline::gateway
