// Test helpers (header only, used by the engine's *_test.cc files): a tiny
// synthetic model, written and loaded once per test process, and a
// stream's tokens.
#ifndef REDLINE_ENGINE_ENGINE_TEST_MODEL_H_
#define REDLINE_ENGINE_ENGINE_TEST_MODEL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/request.h"
#include "model/arch/model.h"
#include "model/arch/synthetic.h"

namespace redline::engine::testing {

// The "tiny" preset in Q8_0 (vocab 512, with a tokenizer).
inline const model::Model& TinyTestModel() {
  static std::unique_ptr<model::Model> model = [] {
    // One file per process: ctest runs the tests of a binary in parallel
    // processes, which must not write the same file at once.
    const std::string path =
        (std::filesystem::temp_directory_path() /
         ("redline_engine_test_model_" + std::to_string(::getpid()) + ".gguf"))
            .string();
    ThreadPool pool(2);
    auto spec = model::SyntheticPreset("tiny");
    EXPECT_TRUE(
        model::WriteSyntheticModel(*spec, kernels::DType::kQ8_0, 11, path, pool)
            .ok());
    auto m = model::Model::Load(path);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    std::filesystem::remove(path);  // the mapping stays valid
    return std::move(m).value();
  }();
  return *model;
}

// The tokens `s` delivers until its last event; *done: whether that was
// kDone (not an error, nor `wait` passing with no event).
inline std::vector<int32_t> StreamTokens(
    RequestStream& s, bool* done,
    std::chrono::seconds wait = std::chrono::seconds(60)) {
  std::vector<int32_t> tokens;
  RequestEvent e;
  *done = false;
  while (s.Pop(&e, wait)) {
    if (e.type == RequestEvent::Type::kToken) {
      tokens.push_back(e.token);
      continue;
    }
    *done = e.type == RequestEvent::Type::kDone;
    break;
  }
  return tokens;
}

}  // namespace redline::engine::testing

#endif  // REDLINE_ENGINE_ENGINE_TEST_MODEL_H_
