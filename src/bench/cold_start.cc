#include "bench/cold_start.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "http/client.h"
#include "http/event_loop.h"
#include "http/url.h"

namespace redline::bench {

Result<std::unique_ptr<ServerProcess>> ServerProcess::Launch(
    const std::string& command, const std::string& log_path) {
  int log_fd = -1;
  if (!log_path.empty()) {
    log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                    0644);
    if (log_fd < 0) return Status::IoError("cannot open " + log_path);
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (log_fd >= 0) ::close(log_fd);
    return Status::IoError("fork failed");
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    ::execl("/bin/sh", "sh", "-c", command.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so there is no race with kill()
  if (log_fd >= 0) ::close(log_fd);
  return std::unique_ptr<ServerProcess>(new ServerProcess(pid));
}

ServerProcess::~ServerProcess() { Stop(); }

bool ServerProcess::Running() {
  if (reaped_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return false;
  }
  return true;
}

int ServerProcess::Stop(int64_t grace_ms) {
  if (stopped_) return status_;
  stopped_ = true;
  // The whole process group: the shell and the server it started.
  ::kill(-pid_, SIGTERM);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  auto group_alive = [&] {
    Running();  // reaps the shell when it has exited
    return ::kill(-pid_, 0) == 0;
  };
  while (std::chrono::steady_clock::now() < deadline && group_alive()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (group_alive()) ::kill(-pid_, SIGKILL);
  if (!reaped_) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  // Wait (briefly) until the killed group is gone, so its ports are free.
  for (int i = 0; i < 100 && ::kill(-pid_, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return status_;
}

namespace {

// One blocking GET; returns the status (0 on transport failure).
int Probe(http::EventLoop& loop, http::Client& client,
          const http::ParsedUrl& url) {
  struct Handler : http::ResponseHandler {
    http::EventLoop* loop;
    int status = 0;
    void OnHeaders(const http::ResponseHead& h, int64_t) override {
      status = h.status;
    }
    void OnComplete(const http::TransportResult& r, int64_t) override {
      if (r.error != http::TransportError::kNone) status = 0;
      loop->Stop();
    }
  } handler;
  handler.loop = &loop;
  http::ClientRequest req;
  req.method = "GET";
  req.target = url.target;
  req.total_timeout_ms = 2000;
  client.Send(url.origin, std::move(req), &handler);
  loop.Restart();
  loop.Run();
  return handler.status;
}

}  // namespace

Status WaitReady(const std::vector<std::string>& urls, int64_t timeout_ms,
                 int64_t interval_ms, ServerProcess* process,
                 ColdStartInfo* info) {
  std::vector<http::ParsedUrl> parsed;
  for (const std::string& u : urls) {
    auto p = http::ParseUrl(u);
    if (!p.ok()) return p.status();
    parsed.push_back(*p);
  }
  http::EventLoop loop;
  http::ClientOptions opts;
  opts.connect_timeout_ms = 1000;
  opts.tls_verify = false;  // readiness only
  http::Client client(loop, opts);
  const int64_t t0 = http::NowNs();
  while (true) {
    for (size_t i = 0; i < parsed.size(); ++i) {
      const int status = Probe(loop, client, parsed[i]);
      if (status >= 200 && status <= 299) {
        info->ready = true;
        info->ready_url = urls[i];
        info->time_to_ready_s = static_cast<double>(http::NowNs() - t0) / 1e9;
        return Status::Ok();
      }
    }
    const int64_t elapsed_ms = (http::NowNs() - t0) / 1'000'000;
    if (process != nullptr && !process->Running()) {
      info->note = "the server process exited before it was ready";
      info->time_to_ready_s = static_cast<double>(elapsed_ms) / 1e3;
      return Status::Unavailable(info->note);
    }
    if (elapsed_ms >= timeout_ms) {
      info->note =
          "not ready after " + std::to_string(timeout_ms / 1000) + " s";
      info->time_to_ready_s = static_cast<double>(elapsed_ms) / 1e3;
      return Status::DeadlineExceeded(info->note);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
}

}  // namespace redline::bench
