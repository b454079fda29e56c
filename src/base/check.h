// Invariant checks. RL_CHECK is always on; RL_DCHECK is on in debug and
// sanitizer builds. A failed check prints file:line, the condition and any
// streamed message, then aborts: it marks a bug, never bad input (use Status).
//
//   RL_CHECK(n > 0) << "n=" << n;
#ifndef REDLINE_BASE_CHECK_H_
#define REDLINE_BASE_CHECK_H_

#include <sstream>

namespace redline::internal {

// Collects the message of a failed check; aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `cond ? (void)0 : Voidify() & stream` type-check.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace redline::internal

#define RL_CHECK(cond)                                                      \
  (cond) ? (void)0                                                          \
         : ::redline::internal::Voidify() &                                 \
               ::redline::internal::CheckFailure(__FILE__, __LINE__, #cond) \
                   .stream()

#if !defined(NDEBUG) || defined(RL_DCHECK_ALWAYS_ON)
#define RL_DCHECK_IS_ON 1
#define RL_DCHECK(cond) RL_CHECK(cond)
#else
#define RL_DCHECK_IS_ON 0
#define RL_DCHECK(cond)                                                   \
  true ? (void)0                                                          \
       : ::redline::internal::Voidify() &                                 \
             ::redline::internal::CheckFailure(__FILE__, __LINE__, #cond) \
                 .stream()
#endif

#endif  // REDLINE_BASE_CHECK_H_
