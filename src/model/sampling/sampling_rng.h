// SamplingRng: the pseudo-random generator behind seeded sampling.
//
// xoshiro256** (Blackman and Vigna, 2018) with its 256-bit state filled from
// the 64-bit seed by splitmix64, as its authors recommend. Both are fully
// specified integer algorithms, so a seed gives the same stream on every
// compiler and platform. The standard <random> engines are portable too, but
// std::uniform_*_distribution is implementation-defined, so we also define our
// own uniform double (NextDouble) and never use the standard distributions.
//
// Ownership: a value type (32 bytes). Thread-safety: thread-compatible; give
// each sequence its own generator. Cost: a few integer ops per draw.
#ifndef REDLINE_MODEL_SAMPLING_SAMPLING_RNG_H_
#define REDLINE_MODEL_SAMPLING_SAMPLING_RNG_H_

#include <cstdint>

namespace redline::model {

// One step of splitmix64: advances *state and returns the next output.
inline uint64_t SplitMix64Next(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class SamplingRng {
 public:
  explicit SamplingRng(uint64_t seed) {
    uint64_t sm = seed;
    // splitmix64 never yields four zero words in a row, so the xoshiro state
    // is never the all-zero state (its only bad state).
    for (uint64_t& word : s_) word = SplitMix64Next(&sm);
  }

  // Next 64 uniformly distributed bits.
  uint64_t Next() {
    const uint64_t result = RotL(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = RotL(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) on the grid k * 2^-53: the top 53 bits of Next() scaled
  // exactly (every such value is representable as a double, so no rounding
  // can reach 1.0).
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t RotL(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t s_[4];
};

}  // namespace redline::model

#endif  // REDLINE_MODEL_SAMPLING_SAMPLING_RNG_H_
