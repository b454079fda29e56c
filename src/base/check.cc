#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace redline::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  std::string m = stream_.str();
  std::fprintf(stderr, "%s\n", m.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace redline::internal
