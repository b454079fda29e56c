// Whether this build runs under ThreadSanitizer or AddressSanitizer (the
// tsan and asan presets) or clang's MemorySanitizer. For tests only: these
// run code several to tens of times slower and keep shadow memory (and
// freed memory in quarantine), so time and memory bounds mean nothing
// there, and the slowest cases may be trimmed.
#ifndef REDLINE_BASE_SANITIZERS_H_
#define REDLINE_BASE_SANITIZERS_H_

// GCC defines __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__; clang answers
// __has_feature.
#if defined(__has_feature)
#define RL_HAS_FEATURE(x) __has_feature(x)
#else
#define RL_HAS_FEATURE(x) 0
#endif

namespace redline {

#if defined(__SANITIZE_THREAD__) || RL_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

#if defined(__SANITIZE_ADDRESS__) || RL_HAS_FEATURE(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

#if RL_HAS_FEATURE(memory_sanitizer)
inline constexpr bool kMemorySanitizer = true;
#else
inline constexpr bool kMemorySanitizer = false;
#endif

// Any sanitizer that slows code down or holds on to memory.
inline constexpr bool kSanitized =
    kThreadSanitizer || kAddressSanitizer || kMemorySanitizer;

}  // namespace redline

#undef RL_HAS_FEATURE

#endif  // REDLINE_BASE_SANITIZERS_H_
