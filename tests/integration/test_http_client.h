// A deliberately small, blocking HTTP/1.1 client over POSIX sockets for the
// server integration tests. Independent of src/http on purpose: the tests
// check the server's bytes on the wire with code that shares nothing with
// it, and need control the real client does not offer (close mid-stream,
// send a lying Content-Length, raw malformed requests).
//
// Every socket read has a timeout (30 s) so a broken server fails a test
// instead of hanging it. Loopback only.
//
// Thread-safety: one TestConnection per thread; free functions are safe.
#ifndef REDLINE_TESTS_INTEGRATION_TEST_HTTP_CLIENT_H_
#define REDLINE_TESTS_INTEGRATION_TEST_HTTP_CLIENT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redline::testing {

struct HttpResponse {
  int status = 0;  // 0: transport failure (see error)
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // de-chunked
  std::string error;
  // First header with this name (case-insensitive), "" when absent.
  std::string Header(std::string_view name) const;
};

class TestConnection {
 public:
  TestConnection() = default;
  ~TestConnection();
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;

  bool Connect(uint16_t port);
  bool SendRaw(std::string_view bytes);
  // Sends a request with Content-Length (and Connection: keep-alive).
  bool SendRequest(
      std::string_view method, std::string_view path, std::string_view body,
      const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Reads one response. `on_data` sees each body piece as it arrives
  // (de-chunked); returning false stops reading (the response is then
  // incomplete and the connection should be closed).
  HttpResponse ReadResponse(
      const std::function<bool(std::string_view)>& on_data = {});
  void Close();

 private:
  bool Fill();  // reads more bytes into buf_; false on EOF/error/timeout
  bool ReadLine(std::string* line);
  bool ReadExact(size_t n, std::string* out);

  int fd_ = -1;
  std::string buf_;
};

// One request on a fresh connection.
HttpResponse Http(
    uint16_t port, std::string_view method, std::string_view path,
    std::string_view body = {},
    const std::vector<std::pair<std::string, std::string>>& headers = {});

struct SseStream {
  std::vector<std::string> data;  // payloads of "data:" events, in order
  int comments = 0;               // ":" lines (keep-alive pings)
};
// Splits an SSE body into events.
SseStream ParseSse(std::string_view body);

}  // namespace redline::testing

#endif  // REDLINE_TESTS_INTEGRATION_TEST_HTTP_CLIENT_H_
