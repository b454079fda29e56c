#include "test_http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace redline::testing {
namespace {

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string HttpResponse::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return v;
  }
  return {};
}

TestConnection::~TestConnection() { Close(); }

bool TestConnection::Connect(uint16_t port) {
  Close();
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return false;
  timeval tv{30, 0};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Close();
    return false;
  }
  return true;
}

void TestConnection::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  buf_.clear();
}

bool TestConnection::SendRaw(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool TestConnection::SendRequest(
    std::string_view method, std::string_view path, std::string_view body,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string req;
  req += method;
  req += ' ';
  req += path;
  req += " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  bool has_type = false;
  for (const auto& [k, v] : headers) {
    req += k + ": " + v + "\r\n";
    has_type = has_type || IEquals(k, "Content-Type");
  }
  if (!has_type && !body.empty()) req += "Content-Type: application/json\r\n";
  if (method != "GET" || !body.empty())
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n";
  req += body;
  return SendRaw(req);
}

bool TestConnection::Fill() {
  char tmp[16384];
  const ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
  if (n <= 0) return false;
  buf_.append(tmp, static_cast<size_t>(n));
  return true;
}

bool TestConnection::ReadLine(std::string* line) {
  for (;;) {
    const size_t pos = buf_.find("\r\n");
    if (pos != std::string::npos) {
      *line = buf_.substr(0, pos);
      buf_.erase(0, pos + 2);
      return true;
    }
    if (!Fill()) return false;
  }
}

bool TestConnection::ReadExact(size_t n, std::string* out) {
  while (buf_.size() < n) {
    if (!Fill()) return false;
  }
  *out = buf_.substr(0, n);
  buf_.erase(0, n);
  return true;
}

HttpResponse TestConnection::ReadResponse(
    const std::function<bool(std::string_view)>& on_data) {
  HttpResponse r;
  std::string line;
  if (!ReadLine(&line)) {
    r.error = "no status line";
    return r;
  }
  if (line.size() < 12 || !line.starts_with("HTTP/1.1 ")) {
    r.error = "bad status line: " + line;
    return r;
  }
  r.status = std::atoi(line.c_str() + 9);
  bool chunked = false;
  long long length = -1;
  for (;;) {
    if (!ReadLine(&line)) {
      r.error = "truncated head";
      r.status = 0;
      return r;
    }
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value[0] == ' ') value.erase(0, 1);
    if (IEquals(name, "Transfer-Encoding") &&
        value.find("chunked") != std::string::npos)
      chunked = true;
    if (IEquals(name, "Content-Length")) length = std::atoll(value.c_str());
    r.headers.emplace_back(std::move(name), std::move(value));
  }
  if (chunked) {
    for (;;) {
      if (!ReadLine(&line)) {
        r.error = "truncated chunk size";
        return r;
      }
      const size_t size = std::strtoul(line.c_str(), nullptr, 16);
      if (size == 0) {
        ReadLine(&line);  // the empty line after the last chunk
        break;
      }
      std::string piece;
      if (!ReadExact(size + 2, &piece)) {
        r.error = "truncated chunk";
        return r;
      }
      piece.resize(size);
      r.body += piece;
      if (on_data && !on_data(piece)) {
        r.error = "stopped by caller";
        return r;
      }
    }
  } else if (length >= 0) {
    if (!ReadExact(static_cast<size_t>(length), &r.body))
      r.error = "truncated body";
    if (on_data) on_data(r.body);
  } else {
    while (Fill()) {
    }
    r.body = std::move(buf_);
    buf_.clear();
  }
  return r;
}

HttpResponse Http(
    uint16_t port, std::string_view method, std::string_view path,
    std::string_view body,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  TestConnection c;
  if (!c.Connect(port)) {
    HttpResponse r;
    r.error = "connect failed";
    return r;
  }
  if (!c.SendRequest(method, path, body, headers)) {
    HttpResponse r;
    r.error = "send failed";
    return r;
  }
  return c.ReadResponse();
}

SseStream ParseSse(std::string_view body) {
  SseStream s;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = body.substr(pos, end - pos);
    if (line.starts_with("data: ")) {
      s.data.emplace_back(line.substr(6));
    } else if (line.starts_with(":")) {
      ++s.comments;
    }
    pos = end + 1;
  }
  return s;
}

}  // namespace redline::testing
