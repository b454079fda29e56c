// Helpers shared by the gateway's loopback tests: request bodies, metric
// reads, bounded polling, a closed port, and stream parsing.
#ifndef REDLINE_TESTS_GATEWAY_GATEWAY_TEST_UTIL_H_
#define REDLINE_TESTS_GATEWAY_GATEWAY_TEST_UTIL_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "test_http_client.h"

namespace redline::gateway::testing {

using namespace std::chrono_literals;

inline std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A chat body; `turns` alternate user/assistant, ending with a user turn.
inline std::string ChatBody(const std::string& model,
                            const std::vector<std::string>& turns, bool stream,
                            int max_tokens = 8,
                            const std::string& system = "") {
  std::string m = "[";
  if (!system.empty())
    m += "{\"role\":\"system\",\"content\":" + JsonString(system) + "},";
  for (size_t i = 0; i < turns.size(); ++i) {
    if (i > 0) m += ",";
    m += std::string("{\"role\":\"") + (i % 2 == 0 ? "user" : "assistant") +
         "\",\"content\":" + JsonString(turns[i]) + "}";
  }
  m += "]";
  return "{\"model\":" + JsonString(model) + ",\"messages\":" + m +
         ",\"max_tokens\":" + std::to_string(max_tokens) +
         ",\"temperature\":0,\"stream\":" + (stream ? "true" : "false") + "}";
}

// Value of one exact series ("name{labels}") in Prometheus text; -1 if absent.
inline double MetricValue(const std::string& text, const std::string& series) {
  size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n')
      return std::strtod(text.c_str() + pos + series.size() + 1, nullptr);
    pos += series.size();
  }
  return -1;
}

// Sum of every series of `name` whose labels contain all of `must`.
inline double MetricSum(const std::string& text, const std::string& name,
                        const std::vector<std::string>& must = {}) {
  double sum = 0;
  size_t pos = 0;
  while ((pos = text.find(name + "{", pos)) != std::string::npos) {
    const bool line_start = pos == 0 || text[pos - 1] == '\n';
    const size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end - pos);
    pos += name.size();
    if (!line_start) continue;
    bool ok = true;
    for (const std::string& m : must) ok &= line.find(m) != std::string::npos;
    if (!ok) continue;
    sum += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return sum;
}

// The whole file ("" when unreadable).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A child process of the built binary (stdout and stderr to `log`);
// SIGKILLed with the test (PDEATHSIG) and when destroyed.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& log) {
    std::vector<char*> argv;
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Child() { Stop(SIGKILL); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // Sends `sig` (0: none, just wait) and reaps the child, bounded: SIGKILL
  // after `limit`. The waitpid status, or -1 when there was no child.
  int Stop(int sig = SIGTERM, std::chrono::milliseconds limit = 10s) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(10ms);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

template <typename F>
bool Eventually(F fn, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (fn()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return fn();
}

// A loopback port nothing listens on (bound, then closed).
inline uint16_t ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// What a client read from a stream through the gateway.
struct StreamRead {
  int status = 0;
  std::string upstream;           // X-Gateway-Upstream
  std::vector<std::string> data;  // data payloads
  bool done = false;              // ended with [DONE]
  bool error_event = false;       // an {"error": ...} event
  bool clean_end = false;         // the chunked body ended properly
  std::string text;               // concatenated content deltas (rough)
};

inline StreamRead ReadStream(const redline::testing::HttpResponse& r) {
  StreamRead s;
  s.status = r.status;
  s.upstream = r.Header("X-Gateway-Upstream");
  s.clean_end = r.error.empty();
  for (const std::string& d : redline::testing::ParseSse(r.body).data) {
    s.data.push_back(d);
    if (d == "[DONE]") s.done = true;
    if (d.starts_with("{\"error\"")) s.error_event = true;
    const size_t c = d.find("\"content\":\"");
    if (c != std::string::npos) {
      const size_t b = c + 11;
      s.text += d.substr(b, d.find('"', b) - b);
    }
  }
  return s;
}

}  // namespace redline::gateway::testing

#endif  // REDLINE_TESTS_GATEWAY_GATEWAY_TEST_UTIL_H_
