// RequestParser: Beast's basic_parser with the limits and HTTP/1.1 checks
// described in the header. The header block and each chunk-size line (or
// last chunk with its trailers) are handed to Beast capped at what their
// limit allows, so a limit trips at the same byte however the input is split.
#include "http/request_parser.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <limits>
#include <optional>
#include <utility>

namespace redline::http {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using boost::system::error_code;

namespace {

// A chunk-size line always gets at least this much, however little the header
// block left of the limit, so that a normal chunked body never fails.
constexpr size_t kMinChunkLineBytes = 1024;

char Lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

struct RequestParser::Impl {
  class Beast final : public bhttp::basic_parser<true> {
   public:
    explicit Beast(Impl& owner) : owner_(owner) {}

   private:
    void on_request_impl(bhttp::verb, boost::beast::string_view method,
                         boost::beast::string_view target, int version,
                         error_code& ec) override {
      owner_.OnRequestLine(std::string_view(method.data(), method.size()),
                           std::string_view(target.data(), target.size()),
                           version, ec);
    }
    void on_response_impl(int, boost::beast::string_view, int,
                          error_code& ec) override {
      ec = bhttp::error::bad_status;
    }
    void on_field_impl(bhttp::field, boost::beast::string_view name,
                       boost::beast::string_view value,
                       error_code& ec) override {
      owner_.OnField(std::string_view(name.data(), name.size()),
                     std::string_view(value.data(), value.size()), ec);
    }
    void on_header_impl(error_code& ec) override { owner_.OnHeader(ec); }
    void on_body_init_impl(const boost::optional<uint64_t>&,
                           error_code&) override {}
    size_t on_body_impl(boost::beast::string_view body, error_code&) override {
      owner_.request.body.append(body.data(), body.size());
      return body.size();
    }
    void on_chunk_header_impl(uint64_t size, boost::beast::string_view,
                              error_code&) override {
      owner_.chunk_left = size;
    }
    size_t on_chunk_body_impl(uint64_t, boost::beast::string_view body,
                              error_code&) override {
      owner_.request.body.append(body.data(), body.size());
      owner_.chunk_left -= std::min<uint64_t>(owner_.chunk_left, body.size());
      return body.size();
    }
    void on_finish_impl(error_code&) override {}

    Impl& owner_;
  };

  explicit Impl(RequestLimits l) : limits(l) { Start(); }

  void Start() {
    beast.emplace(*this);
    // Spans handed to Beast never exceed max_header_bytes, so Beast's own
    // header limit (checked against the span) stays out of the way; ours is
    // the cap in Feed.
    const uint64_t header_limit =
        std::min<uint64_t>(static_cast<uint64_t>(limits.max_header_bytes) + 1,
                           std::numeric_limits<uint32_t>::max());
    beast->header_limit(static_cast<uint32_t>(header_limit));
    beast->body_limit(static_cast<uint64_t>(limits.max_body_bytes));
    beast->eager(false);
    state = State::kHeader;
    request = ServerRequest{};
    version = 0;
    header_bytes = 0;
    chunk_left = 0;
    in_trailers = false;
    host_count = 0;
    content_length_seen = false;
    transfer_encoding.clear();
    transfer_encoding_seen = false;
    expect_continue = false;
    error_status = 0;
    error_detail.clear();
  }

  void Fail(int status, std::string detail, error_code& ec) {
    state = State::kError;
    error_status = status;
    error_detail = std::move(detail);
    // Any error stops Beast; which one does not matter, the status is ours.
    ec = bhttp::error::bad_value;
  }

  void OnRequestLine(std::string_view method, std::string_view target, int v,
                     error_code&) {
    version = v;  // Beast accepts only 1.0 and 1.1
    request.method.assign(method);
    request.target.assign(target);
  }

  void OnField(std::string_view name, std::string_view value, error_code& ec) {
    // Beast joins an obs-fold into one value in a buffer of its own, or (when
    // the first line of the field is empty) skips the fold: either way the
    // value is not where a single-line field would put it.
    const char* value_end = value.data() + value.size();
    const bool in_input = value.data() >= feed_begin && value_end <= feed_end;
    bool folded = !in_input;
    if (in_input) {
      for (const char* p = name.data() + name.size(); p < value.data(); ++p)
        folded |= *p == '\r' || *p == '\n';
    }
    if (folded) {
      Fail(400, "obsolete line folding in field '" + std::string(name) + "'",
           ec);
      return;
    }
    if (in_trailers) return;  // checked above, never merged into the head
    if (EqualsIgnoreCase(name, "host")) {
      ++host_count;
    } else if (EqualsIgnoreCase(name, "content-length")) {
      content_length_seen = true;
    } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
      transfer_encoding_seen = true;
      if (!transfer_encoding.empty()) transfer_encoding += ',';
      transfer_encoding.append(value);
    }
    request.headers.push_back({std::string(name), std::string(value)});
  }

  void OnHeader(error_code& ec) {
    in_trailers = true;
    if (version >= 11 && host_count == 0) {
      Fail(400, "HTTP/1.1 request without Host", ec);
      return;
    }
    if (host_count > 1) {
      Fail(400, "more than one Host field", ec);
      return;
    }
    if (transfer_encoding_seen) {
      CheckTransferEncoding(ec);
      if (state == State::kError) return;
    }
    if (version >= 11 && !beast->is_done()) {
      for (const Header& h : request.headers) {
        if (EqualsIgnoreCase(h.name, "expect") &&
            EqualsIgnoreCase(TrimOws(h.value), "100-continue")) {
          expect_continue = true;
        }
      }
    }
  }

  void CheckTransferEncoding(error_code& ec) {
    if (content_length_seen) {
      Fail(400, "both Transfer-Encoding and Content-Length", ec);
      return;
    }
    if (version < 11) {
      Fail(400, "Transfer-Encoding in an HTTP/1.0 request", ec);
      return;
    }
    int chunked = 0;
    std::string_view last;
    std::string_view other;
    std::string_view rest = transfer_encoding;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view coding = TrimOws(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view()
                                             : rest.substr(comma + 1);
      if (coding.empty()) continue;
      last = coding;
      if (EqualsIgnoreCase(coding, "chunked")) {
        ++chunked;
      } else if (other.empty()) {
        other = coding;
      }
    }
    if (!EqualsIgnoreCase(last, "chunked")) {
      Fail(400, "Transfer-Encoding does not end in chunked", ec);
    } else if (chunked > 1) {
      Fail(400, "chunked applied more than once", ec);
    } else if (!other.empty()) {
      Fail(501, "transfer coding '" + std::string(other) + "' not supported",
           ec);
    }
  }

  void FailFromBeast(const error_code& ec) {
    error_code ignored;
    if (ec == bhttp::error::body_limit) {
      Fail(413,
           "request body exceeds the limit of " +
               std::to_string(limits.max_body_bytes) + " bytes",
           ignored);
    } else if (ec == bhttp::error::header_limit) {
      // Beast's only own header limit left: an obs-fold longer than its
      // joining buffer.
      Fail(431, HeaderLimitDetail(), ignored);
    } else {
      Fail(400, ec.message(), ignored);
    }
  }

  std::string HeaderLimitDetail() const {
    return "request header fields exceed the limit of " +
           std::to_string(limits.max_header_bytes) + " bytes";
  }

  // What a chunk-size line or the last chunk with its trailers may take.
  size_t ChunkLineAllowance() const {
    const size_t left = limits.max_header_bytes > header_bytes
                            ? limits.max_header_bytes - header_bytes
                            : 0;
    return std::max(left, kMinChunkLineBytes);
  }

  RequestLimits limits;
  std::optional<Beast> beast;
  State state = State::kHeader;
  ServerRequest request;
  int version = 0;
  size_t header_bytes = 0;
  uint64_t chunk_left = 0;  // data bytes left in the current chunk
  bool in_trailers = false;
  int host_count = 0;
  bool content_length_seen = false;
  bool transfer_encoding_seen = false;
  std::string transfer_encoding;  // every Transfer-Encoding line, joined
  bool expect_continue = false;
  int error_status = 0;
  std::string error_detail;
  // The span Beast is parsing (for the obs-fold check).
  const char* feed_begin = nullptr;
  const char* feed_end = nullptr;
};

RequestParser::RequestParser(RequestLimits limits)
    : impl_(std::make_unique<Impl>(limits)) {}

RequestParser::~RequestParser() = default;

size_t RequestParser::MaxUnparsedBytes(const RequestLimits& limits) {
  return std::max(limits.max_header_bytes, kMinChunkLineBytes);
}

size_t RequestParser::Feed(std::string_view data) {
  Impl& s = *impl_;
  error_code ignored;
  size_t total = 0;
  while (s.state == State::kHeader || s.state == State::kBody) {
    std::string_view span = data.substr(total);
    size_t cap = std::string_view::npos;
    if (s.state == State::kHeader) {
      cap = s.limits.max_header_bytes - s.header_bytes;
    } else if (s.beast->chunked() && s.chunk_left == 0) {
      cap = s.ChunkLineAllowance();
    }
    const bool capped = span.size() >= cap;
    if (capped) span = span.substr(0, cap);
    if (span.empty()) {
      // A request line that used up the whole header allowance.
      if (capped) s.Fail(431, s.HeaderLimitDetail(), ignored);
      break;
    }
    s.feed_begin = span.data();
    s.feed_end = span.data() + span.size();
    const State before = s.state;
    error_code ec;
    const size_t used =
        s.beast->put(asio::buffer(span.data(), span.size()), ec);
    total += used;
    if (before == State::kHeader) s.header_bytes += used;
    if (s.state == State::kError) break;  // one of our checks failed
    if (ec == bhttp::error::need_more) {
      // Progress inside a capped span (the request line, or chunks before
      // an incomplete chunk-size line): go on with a fresh cap from there.
      if (capped && used > 0) continue;
      if (capped) {
        s.Fail(431,
               before == State::kHeader
                   ? s.HeaderLimitDetail()
                   : "chunk-size line or trailer section exceeds the " +
                         std::to_string(s.ChunkLineAllowance()) +
                         " bytes left of the header limit",
               ignored);
      }
      break;
    }
    if (ec) {
      s.FailFromBeast(ec);
      break;
    }
    if (s.beast->is_done()) {
      s.state = State::kDone;
      break;
    }
    if (before == State::kHeader && s.beast->is_header_done()) {
      // Hand the head to the caller before consuming any body byte.
      s.state = State::kBody;
      s.beast->eager(true);
      break;
    }
    if (used == 0) break;
  }
  return total;
}

RequestParser::State RequestParser::state() const { return impl_->state; }
ServerRequest& RequestParser::request() { return impl_->request; }
int RequestParser::version() const { return impl_->version; }
bool RequestParser::keep_alive() const {
  return impl_->beast->is_header_done() && impl_->beast->keep_alive();
}
bool RequestParser::expect_continue() const { return impl_->expect_continue; }
size_t RequestParser::header_bytes() const { return impl_->header_bytes; }
int RequestParser::error_status() const { return impl_->error_status; }
const std::string& RequestParser::error_detail() const {
  return impl_->error_detail;
}
void RequestParser::Reset() { impl_->Start(); }

}  // namespace redline::http
