// Scratch files for the quant tests: one directory per test process,
// removed when the tests end.
#ifndef REDLINE_QUANT_TEST_FILES_H_
#define REDLINE_QUANT_TEST_FILES_H_

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace redline::quant::testing {

// ../shared/testdata/quant.
inline std::string QuantDir() {
  return std::string(RL_SHARED_DIR) + "/testdata/quant";
}

// A path in this process's scratch directory.
inline std::string TempPath(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      fmt::format("redline_quant_test_{}", ::getpid());
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

inline std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Removes the scratch directory when the tests end (register once per
// binary).
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(
        std::filesystem::path(TempPath("x")).parent_path(), ec);
  }
};

}  // namespace redline::quant::testing

#endif  // REDLINE_QUANT_TEST_FILES_H_
