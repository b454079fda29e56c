// The serving defects a new user met, tried through the shipped binary:
// `model = ...` in a config file, `--host localhost`, a context whose KV
// cache cannot fit (refused before "listening"), `run`'s default context,
// and `--draft-model` (same output as without; another vocabulary refused). Each command is bounded by `timeout`; loopback only.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "base/thread_pool.h"
#include "model/arch/synthetic.h"
#include "test_http_client.h"

namespace redline {
namespace {

using namespace std::chrono_literals;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class ServeCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() /
           ("redline_serve_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    model_ = (dir_ / "tiny.gguf").string();
    auto spec = model::SyntheticPreset("tiny");
    ASSERT_TRUE(spec.ok());
    ThreadPool pool(1);
    ASSERT_TRUE(model::WriteSyntheticModel(*spec, kernels::DType::kQ8_0, 3,
                                           model_, pool)
                    .ok());
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  // Starts `redline serve ARGS --port 0 --port-file F` in the background,
  // waits for /readyz, checks `check(port)`, then stops it with SIGTERM.
  void ServeAndCheck(const std::string& args,
                     const std::function<void(uint16_t)>& check) {
    const std::string port_file = (dir_ / "port").string();
    const std::string pid_file = (dir_ / "pid").string();
    const std::string log = (dir_ / "serve.log").string();
    std::filesystem::remove(port_file);
    ASSERT_EQ(Shell("timeout 120 " + std::string(RL_REDLINE_BIN) + " serve " +
                    args + " --port 0 --port-file " + port_file +
                    " --threads 1 > " + log + " 2>&1 & echo $! > " + pid_file),
              0);
    uint16_t port = 0;
    const auto end = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < end) {
      const std::string p = ReadFile(port_file);
      if (!p.empty()) port = static_cast<uint16_t>(std::stoi(p));
      if (port != 0 && testing::Http(port, "GET", "/readyz").status == 200)
        break;
      std::this_thread::sleep_for(50ms);
    }
    ASSERT_NE(port, 0) << ReadFile(log);
    check(port);
    Shell("kill -TERM $(cat " + pid_file + ") 2>/dev/null; sleep 0.5");
  }

  static inline std::filesystem::path dir_;
  static inline std::string model_;
};

TEST_F(ServeCliTest, ModelFromAConfigFileIsHonoured) {
  const std::string cfg = (dir_ / "serve.toml").string();
  std::ofstream(cfg) << "model = \"" << model_ << "\"\nalias = \"cfg\"\n";
  ServeAndCheck("--config " + cfg, [](uint16_t port) {
    const auto r = testing::Http(port, "GET", "/v1/models/cfg");
    EXPECT_EQ(r.status, 200) << r.body;
  });
}

TEST_F(ServeCliTest, LocalhostIsAcceptedAsAHost) {
  ServeAndCheck("-m " + model_ + " --host localhost", [](uint16_t port) {
    EXPECT_EQ(testing::Http(port, "GET", "/livez").status, 200);
  });
}

TEST_F(ServeCliTest, AContextThatCannotFitIsRefusedBeforeListening) {
  const std::string log = (dir_ / "huge.log").string();
  const int code =
      Shell("timeout 60 " + std::string(RL_REDLINE_BIN) + " serve -m " +
            model_ + " --port 0 --ctx 100000000 > " + log + " 2>&1");
  const std::string out = ReadFile(log);
  EXPECT_NE(code, 0);
  EXPECT_NE(code, 134) << "aborted: " << out;  // no std::bad_alloc
  EXPECT_NE(out.find("KV cache"), std::string::npos) << out;
  EXPECT_EQ(out.find("listening"), std::string::npos) << out;

  const int run_code =
      Shell("timeout 60 " + std::string(RL_REDLINE_BIN) + " run -m " + model_ +
            " -p hi -n 2 --ctx 100000000 > " + log + " 2>&1");
  const std::string run_out = ReadFile(log);
  EXPECT_EQ(run_code, 2) << run_out;
  EXPECT_NE(run_out.find("KV cache"), std::string::npos) << run_out;
}

TEST_F(ServeCliTest, RunDefaultsToTheTrainedContextAndWarnsBeyondIt) {
  const std::string log = (dir_ / "run.log").string();
  ASSERT_EQ(Shell("timeout 60 " + std::string(RL_REDLINE_BIN) + " run -m " +
                  model_ + " -p hi -n 2 > " + log + " 2>&1"),
            0)
      << ReadFile(log);
  EXPECT_EQ(ReadFile(log).find("exceeds the model's trained context"),
            std::string::npos);
  ASSERT_EQ(Shell("timeout 60 " + std::string(RL_REDLINE_BIN) + " run -m " +
                  model_ + " -p hi -n 2 --ctx 100000 > " + log + " 2>&1"),
            0)
      << ReadFile(log);
  EXPECT_NE(ReadFile(log).find("exceeds the model's trained context"),
            std::string::npos)
      << ReadFile(log);
}

// The last line of stdout with --print-ids: the generated ids.
std::string LastLine(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const size_t nl = t.find_last_of('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

TEST_F(ServeCliTest, RunWithADraftModelPrintsThePlainTokens) {
  ThreadPool pool(1);
  auto spec = model::SyntheticPreset("tiny");
  ASSERT_TRUE(spec.ok());
  spec->block_count = 1;
  spec->embedding_length = 32;
  spec->feed_forward_length = 96;
  const std::string draft = (dir_ / "draft.gguf").string();
  ASSERT_TRUE(
      model::WriteSyntheticModel(*spec, kernels::DType::kQ8_0, 4, draft, pool)
          .ok());
  spec->vocab_size = 1024;
  const std::string other = (dir_ / "other_vocab.gguf").string();
  ASSERT_TRUE(
      model::WriteSyntheticModel(*spec, kernels::DType::kQ8_0, 4, other, pool)
          .ok());
  const std::string bin = "timeout 60 " + std::string(RL_REDLINE_BIN);
  const std::string common = " run -q -m " + model_ +
                             " -p 'the cat sat on the mat' -n 24 --temp 0 "
                             "--ignore-eos --print-ids -t 1";
  const std::string out = (dir_ / "run_out.txt").string();
  const std::string err = (dir_ / "run_err.txt").string();
  ASSERT_EQ(Shell(bin + common + " > " + out + " 2> " + err), 0)
      << ReadFile(err);
  const std::string plain = LastLine(ReadFile(out));
  for (const std::string& d : {draft, model_}) {
    ASSERT_EQ(Shell(bin + common + " -md " + d + " --draft-max 4 > " + out +
                    " 2> " + err),
              0)
        << ReadFile(err);
    EXPECT_EQ(LastLine(ReadFile(out)), plain) << d;
    EXPECT_NE(ReadFile(err).find("drafts from the draft model"),
              std::string::npos)
        << ReadFile(err);
  }
  // Another vocabulary: a clear error and a failing exit status, from run
  // and from serve (before it is ready).
  EXPECT_EQ(Shell(bin + common + " --draft-model " + other + " > " + out +
                  " 2> " + err),
            1);
  EXPECT_NE(ReadFile(err).find("the draft model's vocabulary has 1024 tokens"),
            std::string::npos)
      << ReadFile(err);
  const int serve_code =
      Shell(bin + " serve -m " + model_ + " --draft-model " + other +
            " --port 0 --threads 1 --ctx 256 > " + err + " 2>&1");
  EXPECT_NE(serve_code, 0);
  EXPECT_NE(serve_code, 124) << "did not exit: " << ReadFile(err);
  EXPECT_NE(ReadFile(err).find("the draft model's vocabulary has 1024 tokens"),
            std::string::npos)
      << ReadFile(err);
}

}  // namespace
}  // namespace redline
