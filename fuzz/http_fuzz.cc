// libFuzzer target for http::RequestParser, the parser and checks the
// Server runs on every connection: feeds the input as a stream of pipelined
// requests, once whole and once split into pieces (as reads would split it),
// and checks that
//   - both give the same requests (method, target, headers, body) and both
//     refuse or neither: the outcome does not depend on the split (except
//     that a split input may still wait for the end of a header block that
//     the whole input was already refused for, and that malformed input may
//     be refused with another status: see request_parser.h);
//   - a refusal is one of 400, 413, 431, 501, with a message;
//   - nothing grows past its limit: unparsed input waiting for more stays
//     under the header allowance, bodies under max_body_bytes, the header
//     block under max_header_bytes.
// The first input byte picks the limits and the piece size: bit 0 a 256-byte
// header limit (else 16 KiB), bit 1 a 64-byte body limit (else 1 MiB), the
// other bits 1..64 bytes per piece. The seeds in tests/data/http_seeds start
// with ' ' (default limits), '!' (small header limit) or '"' (small body
// limit), then the request bytes.
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target http_fuzz
//   ./build/fuzz/fuzz/http_fuzz -max_total_time=30 tests/data/http_seeds
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "http/request_parser.h"

namespace {

using redline::http::RequestLimits;
using redline::http::RequestParser;
using redline::http::ServerRequest;

struct Outcome {
  std::vector<ServerRequest> requests;
  int error_status = 0;
  // The input ended inside a request (no error yet, more bytes awaited).
  bool pending = false;
};

Outcome Parse(std::string_view input, size_t piece,
              const RequestLimits& limits) {
  Outcome out;
  RequestParser p(limits);
  std::string buf;  // unparsed input, as a connection's read buffer holds it
  size_t fed = 0;
  const size_t waiting_bound = RequestParser::MaxUnparsedBytes(limits);
  for (;;) {
    const size_t n = std::min(piece, input.size() - fed);
    buf.append(input.substr(fed, n));
    fed += n;
    for (;;) {
      const size_t used = p.Feed(buf);
      RL_CHECK(used <= buf.size());
      buf.erase(0, used);
      RL_CHECK(p.header_bytes() <= limits.max_header_bytes);
      const RequestParser::State state = p.state();
      if (state == RequestParser::State::kError) {
        const int s = p.error_status();
        RL_CHECK(s == 400 || s == 413 || s == 431 || s == 501) << s;
        RL_CHECK(!p.error_detail().empty());
        out.error_status = s;
        return out;
      }
      if (state == RequestParser::State::kDone) {
        ServerRequest& r = p.request();
        RL_CHECK(!r.method.empty() && !r.target.empty());
        RL_CHECK(r.body.size() <= limits.max_body_bytes);
        out.requests.push_back(std::move(r));
        p.Reset();
        continue;
      }
      RL_CHECK(p.request().body.size() <= limits.max_body_bytes);
      if (used == 0) break;
    }
    // Waiting for more: what is held unparsed is bounded by the limits, not
    // by the input.
    RL_CHECK(buf.size() < waiting_bound) << buf.size();
    if (fed == input.size()) {
      out.pending = !buf.empty() || p.header_bytes() > 0 ||
                    p.state() != RequestParser::State::kHeader;
      return out;
    }
  }
}

bool SameRequest(const ServerRequest& a, const ServerRequest& b) {
  if (a.method != b.method || a.target != b.target || a.body != b.body ||
      a.headers.size() != b.headers.size())
    return false;
  for (size_t i = 0; i < a.headers.size(); ++i) {
    if (a.headers[i].name != b.headers[i].name ||
        a.headers[i].value != b.headers[i].value)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t config = data[0];
  const std::string_view input(reinterpret_cast<const char*>(data + 1),
                               size - 1);
  RequestLimits limits;
  limits.max_header_bytes = (config & 1) != 0 ? 256 : 16 * 1024;
  limits.max_body_bytes = (config & 2) != 0 ? 64 : 1024 * 1024;
  const size_t piece = size_t{1} + (config >> 2);  // 1..64 bytes per read

  const Outcome whole = Parse(input, input.size() + 1, limits);
  const Outcome split = Parse(input, piece, limits);
  // Beast looks at a partial header block again only once its end has
  // arrived, so a split input may still be waiting where the whole one was
  // already refused. Apart from that, the same requests, the same refusal.
  if (!whole.pending && !split.pending) {
    RL_CHECK((whole.error_status == 0) == (split.error_status == 0))
        << whole.error_status << " vs " << split.error_status;
    RL_CHECK(whole.requests.size() == split.requests.size());
  } else if (whole.error_status != split.error_status) {
    RL_CHECK(whole.error_status == 0 ? whole.pending : split.pending);
  }
  const size_t common = std::min(whole.requests.size(), split.requests.size());
  for (size_t i = 0; i < common; ++i)
    RL_CHECK(SameRequest(whole.requests[i], split.requests[i]));
  return 0;
}
