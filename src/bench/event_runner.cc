#include "bench/event_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "base/utf8.h"

extern char** environ;

namespace redline::bench {

namespace {

constexpr int64_t kNsPerMs = 1'000'000;
constexpr int64_t kRunningPollNs = 10 * kNsPerMs;
constexpr int64_t kIdlePollNs = 50 * kNsPerMs;
constexpr size_t kReadChunkBytes = 64 * 1024;
constexpr size_t kMaxReadPerPollBytes = 1024 * 1024;

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

// Keeps the last `limit` bytes, never starting inside a UTF-8 sequence.
void TrimTail(std::string* s, size_t limit) {
  if (s->size() <= limit) return;
  size_t cut = s->size() - limit;
  while (cut < s->size() &&
         (static_cast<unsigned char>((*s)[cut]) & 0xC0) == 0x80)
    ++cut;
  s->erase(0, cut);
}

// The tail as it is recorded: bounded, and valid UTF-8 for the JSON.
void FinishTail(std::string* s, size_t limit) {
  TrimTail(s, limit);
  if (!utf8::IsValid(*s)) *s = utf8::Sanitize(*s);
}

}  // namespace

EventRunner::EventRunner(std::vector<EventSpec> specs,
                         EventRunnerOptions options)
    : options_(options) {
  records_.resize(specs.size());
  children_.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    records_[i].spec = std::move(specs[i]);
    records_[i].timeout_s = static_cast<double>(options_.timeout_ns) / 1e9;
  }
}

EventRunner::~EventRunner() { Abandon(); }

void EventRunner::Start(int64_t base_ns) {
  if (!base_ns_) base_ns_ = base_ns;
}

double EventRunner::OffsetS(int64_t ns) const {
  return static_cast<double>(ns - base_ns_.value_or(ns)) / 1e9;
}

void EventRunner::Spawn(size_t i, int64_t now_ns) {
  EventRecord& rec = records_[i];
  Child& c = children_[i];
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    rec.error = std::string("pipe: ") + ::strerror(errno);
    for (int* fd : {&out[0], &out[1], &err[0], &err[1]}) CloseFd(fd);
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  // Nothing else of bench's (its sockets, the loop's epoll and eventfd) goes
  // with the command: a server it starts in the background must not hold
  // bench's connections open.
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group (so the whole group can be killed), default
  // dispositions for what bench ignores or handles, nothing blocked.
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD})
    sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
                                      POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETSIGMASK);
  std::string sh = "sh", dash_c = "-c";
  char* argv[] = {sh.data(), dash_c.data(), rec.spec.command.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  CloseFd(&out[1]);
  CloseFd(&err[1]);
  if (rc != 0) {
    rec.error = std::string("posix_spawn /bin/sh: ") + ::strerror(rc);
    CloseFd(&out[0]);
    CloseFd(&err[0]);
    return;
  }
  for (int fd : {out[0], err[0]})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  c.pid = pid;
  c.out_fd = out[0];
  c.err_fd = err[0];
  c.started_ns = now_ns;
  rec.started = true;
  rec.start_s = OffsetS(now_ns);
}

void EventRunner::ReadStreams(size_t i) {
  EventRecord& rec = records_[i];
  Child& c = children_[i];
  char buf[kReadChunkBytes];
  auto drain = [&](int* fd, std::string* tail, int64_t* total) {
    size_t read_now = 0;
    while (*fd >= 0 && read_now < kMaxReadPerPollBytes) {
      const ssize_t n = ::read(*fd, buf, sizeof(buf));
      if (n > 0) {
        read_now += static_cast<size_t>(n);
        *total += n;
        tail->append(buf, static_cast<size_t>(n));
        if (tail->size() > 2 * options_.tail_bytes)
          TrimTail(tail, options_.tail_bytes);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        CloseFd(fd);  // end of stream or a read error
      }
    }
  };
  drain(&c.out_fd, &rec.stdout_tail, &rec.stdout_bytes);
  drain(&c.err_fd, &rec.stderr_tail, &rec.stderr_bytes);
}

void EventRunner::Reap(size_t i, int64_t now_ns) {
  Child& c = children_[i];
  EventRecord& rec = records_[i];
  int status = 0;
  pid_t r = 0;
  do {
    r = ::waitpid(c.pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return;
  if (r == c.pid) {
    if (WIFSIGNALED(status)) {
      rec.signal = WTERMSIG(status);
    } else if (WIFEXITED(status)) {
      rec.exit_code = WEXITSTATUS(status);
    }
  } else {
    rec.error = std::string("waitpid: ") + ::strerror(errno);
  }
  rec.finished = true;
  rec.end_s = OffsetS(now_ns);
  // What the shell wrote before it exited is still in the pipes. A
  // background child may hold them open: read what is there, then let go.
  ReadStreams(i);
  CloseFd(&c.out_fd);
  CloseFd(&c.err_fd);
  // A group bench signalled goes entirely (its background children too).
  if (c.term_sent_ns != 0) ::kill(-c.pid, SIGKILL);
  FinishTail(&rec.stdout_tail, options_.tail_bytes);
  FinishTail(&rec.stderr_tail, options_.tail_bytes);
  c.pid = -1;
}

void EventRunner::Signal(size_t i, int64_t now_ns) {
  Child& c = children_[i];
  if (c.pid < 0 || c.term_sent_ns != 0) return;
  ::kill(-c.pid, SIGTERM);
  c.term_sent_ns = now_ns;
}

void EventRunner::Poll(int64_t now_ns) {
  if (!base_ns_) return;
  while (!stopping_ && next_ < records_.size() &&
         *base_ns_ + records_[next_].spec.offset_ns <= now_ns) {
    const size_t i = next_++;
    Spawn(i, now_ns);
    if (options_.on_update) options_.on_update(records_[i]);
  }
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (c.pid < 0) continue;
    ReadStreams(i);
    Reap(i, now_ns);
    if (c.pid < 0) {
      if (options_.on_update) options_.on_update(records_[i]);
      continue;
    }
    if (c.term_sent_ns == 0 && now_ns - c.started_ns >= options_.timeout_ns) {
      records_[i].timed_out = true;
      Signal(i, now_ns);
    } else if (c.term_sent_ns != 0 && !c.kill_sent &&
               now_ns - c.term_sent_ns >= options_.kill_grace_ns) {
      ::kill(-c.pid, SIGKILL);
      c.kill_sent = true;
    }
  }
}

int64_t EventRunner::NextWakeNs(int64_t now_ns) const {
  if (!base_ns_) return kIdlePollNs;
  int64_t wait = kIdlePollNs;
  for (const Child& c : children_) {
    if (c.pid >= 0) wait = std::min(wait, kRunningPollNs);
  }
  if (!stopping_ && next_ < records_.size()) {
    const int64_t due = *base_ns_ + records_[next_].spec.offset_ns;
    wait = std::min(wait, std::max<int64_t>(0, due - now_ns));
  }
  return wait;
}

void EventRunner::StopAll(int64_t now_ns) {
  stopping_ = true;
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].pid < 0) continue;
    records_[i].killed_at_end = true;
    Signal(i, now_ns);
  }
}

bool EventRunner::Done() const {
  for (const Child& c : children_) {
    if (c.pid >= 0) return false;
  }
  return stopping_ || next_ == records_.size();
}

void EventRunner::Abandon() {
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (c.pid >= 0) {
      ::kill(-c.pid, SIGKILL);
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        records_[i].finished = true;
        records_[i].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        if (WIFEXITED(status)) records_[i].exit_code = WEXITSTATUS(status);
      } else {
        records_[i].error = "not reaped after SIGKILL";
      }
      c.pid = -1;
      FinishTail(&records_[i].stdout_tail, options_.tail_bytes);
      FinishTail(&records_[i].stderr_tail, options_.tail_bytes);
    }
    CloseFd(&c.out_fd);
    CloseFd(&c.err_fd);
  }
}

EventThread::EventThread(std::vector<EventSpec> specs,
                         EventRunnerOptions options, const Clock& clock)
    : clock_(clock), runner_(std::move(specs), options) {
  thread_ = std::thread([this] { Loop(); });
}

EventThread::~EventThread() {
  if (!finished_) Finish();
}

void EventThread::OnLoadStart(int64_t start_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (start_ns_) return;
    start_ns_ = start_ns;
  }
  cv_.notify_one();
}

void EventThread::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (start_ns_ && !runner_.started()) runner_.Start(*start_ns_);
    lock.unlock();
    runner_.Poll(clock_.NowNs());
    const int64_t wait_ns = runner_.NextWakeNs(clock_.NowNs());
    lock.lock();
    cv_.wait_for(lock, std::chrono::nanoseconds(wait_ns),
                 [this] { return stop_ || (start_ns_ && !runner_.started()); });
  }
  lock.unlock();
  // The run is over: end what still runs, within a bound.
  const int64_t t0 = clock_.NowNs();
  runner_.StopAll(t0);
  runner_.Poll(t0);
  const int64_t deadline = t0 + runner_.options().kill_grace_ns + 1'000'000'000;
  while (!runner_.Done() && clock_.NowNs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    runner_.Poll(clock_.NowNs());
  }
  runner_.Abandon();
}

std::vector<EventRecord> EventThread::Finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  finished_ = true;
  return runner_.records();
}

}  // namespace redline::bench
