// Runtime instruction-set selection. Every kernel has a scalar reference
// (kernels/ref) and SIMD variants in their own translation units
// (kernels/x86/*_avx2.cc, *_avx512.cc); one table of function pointers is
// chosen once from the CPU's features. RL_FORCE_ISA=scalar|avx2|avxvnni|
// avx512|amx overrides detection (for debugging and A/B runs).
#ifndef REDLINE_KERNELS_ISA_H_
#define REDLINE_KERNELS_ISA_H_

#include <string_view>
#include <vector>

namespace redline::kernels {

// kAvx2: AVX2 + FMA + F16C.
// kAvxVnni: kAvx2 plus AVX-VNNI (vpdpbusd on ymm), as Intel's client cores
//   from Alder Lake on have without AVX-512: the int8 panel products use
//   vpdpbusd, everything else is kAvx2's.
// kAvx512: AVX-512 F/BW/VL/DQ/VNNI.
// kAmx: kAvx512 plus AMX-INT8 tiles for quantized prefill (n_tokens > 1);
//   needs Linux to grant tile state, which dispatch asks for once.
// Later values are preferred when available, except kAmx, which only
// RL_FORCE_ISA selects (see dispatch.cc).
enum class Isa { kScalar, kAvx2, kAvxVnni, kAvx512, kAmx };

std::string_view IsaName(Isa isa);

// Variants this CPU can run, scalar first.
std::vector<Isa> AvailableIsas();

// The variant the public kernel functions currently dispatch to.
Isa ActiveIsa();

// Switches dispatch (tests and benchmarks iterate over AvailableIsas()).
// Not thread-safe with concurrent kernel calls. Returns false if this CPU
// cannot run `isa`.
bool SetActiveIsa(Isa isa);

}  // namespace redline::kernels

#endif  // REDLINE_KERNELS_ISA_H_
