// RequestParser: the HTTP/1.1 request parser of http::Server, usable without
// a socket (the fuzz target and the unit tests drive it directly). Beast's
// basic_parser does the framing (behind a pimpl, so Boost stays out of this
// header); on top of it come the checks HTTP/1.1 asks of a server that Beast
// leaves out or that need a server's answer:
//
//   Transfer-Encoding whose last coding is not chunked, chunked applied
//     twice, Transfer-Encoding in HTTP/1.0, Transfer-Encoding together with
//     Content-Length                                          400
//   a transfer coding other than chunked (e.g. "gzip, chunked")  501
//   HTTP/1.1 without Host, more than one Host                 400
//   obs-fold (a field line continued on a line starting with SP/HTAB)  400
//   request line + header fields over max_header_bytes        431
//   chunk-size line or last chunk + trailer section over what the header
//     block left of max_header_bytes (at least 1 KiB)         431
//   body over max_body_bytes (declared or counted)            413
//   anything else Beast refuses (an HTTP version other than 1.0 or
//     1.1 among it)                                           400
//
// Trailer fields are checked and then dropped: they never join the header
// fields the handler sees.
//
// Use: pass Feed() every byte not yet consumed (the caller drops what Feed
// returns and passes the rest again with new bytes appended). Feed stops right
// after the header block, so the caller can judge the head (state() kBody or
// kDone) before any body byte is consumed; further Feed calls read the body
// until kDone or kError. Reset() prepares the next request of the connection.
// Whether requests are accepted, and what they hold, does not depend on how
// the bytes are split across calls. The status of a refusal of malformed
// input may: Beast re-reads a partial header block only once its end has
// arrived (a malformed block over the limit is 400 whole, may be 431 in
// pieces; one without an end is refused at once whole, at the limit or the
// header timeout in pieces), and it counts a chunk size against the body
// limit again each time it re-reads a chunk-size line with a malformed
// extension (400 whole, may be 413 in pieces).
//
// Memory: the body grows with the bytes that arrive (nothing is reserved from
// Content-Length), at most max_body_bytes (capacity up to twice that). The
// caller must be able to hold MaxUnparsedBytes() contiguous unconsumed bytes
// (max_header_bytes, at least 1 KiB); Feed never needs more than that to make
// progress.
//
// Thread-safety: none; one parser per connection, used on one thread.
#ifndef REDLINE_HTTP_REQUEST_PARSER_H_
#define REDLINE_HTTP_REQUEST_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "http/server.h"  // ServerRequest

namespace redline::http {

struct RequestLimits {
  // Request line plus header fields plus the empty line that ends them.
  size_t max_header_bytes = 16 * 1024;
  // Decoded body bytes (Content-Length, or the sum of the chunk sizes).
  size_t max_body_bytes = 16 * 1024 * 1024;
};

class RequestParser {
 public:
  enum class State {
    kHeader,  // the header block is incomplete
    kBody,    // the head is complete; body bytes are pending
    kDone,    // the whole request is parsed
    kError,   // answer error_status() and close the connection
  };

  explicit RequestParser(RequestLimits limits);
  ~RequestParser();

  // The most unconsumed bytes Feed may need at once before it either makes
  // progress or fails: a read buffer this large never stalls the parser.
  static size_t MaxUnparsedBytes(const RequestLimits& limits);
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Parses a prefix of `data` and returns its length. Consumes nothing more
  // once the state is kDone or kError.
  size_t Feed(std::string_view data);

  State state() const;
  // Method, target and header fields once past kHeader; the body with kDone.
  ServerRequest& request();
  // HTTP version as 10 * major + minor (11 for HTTP/1.1); 0 before the
  // request line.
  int version() const;
  // Whether the connection may serve another request after this one.
  bool keep_alive() const;
  // HTTP/1.1 "Expect: 100-continue" with a body still to come.
  bool expect_continue() const;
  // Bytes of the header block consumed so far.
  size_t header_bytes() const;

  // With kError: the status to answer (400, 413, 431 or 501) and what
  // was wrong, for a human (it names the limit when one was exceeded).
  int error_status() const;
  const std::string& error_detail() const;

  // Forgets the request; the next Feed starts a new one.
  void Reset();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace redline::http

#endif  // REDLINE_HTTP_REQUEST_PARSER_H_
