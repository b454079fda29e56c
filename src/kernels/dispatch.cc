// Chooses the kernel table once: the best ISA this CPU (and OS) supports,
// unless RL_FORCE_ISA=scalar|avx2|avxvnni|avx512|amx asks for another.
#include <cpuid.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "kernels/isa.h"
#include "kernels/kernel_table.h"

namespace redline::kernels {
namespace {

struct CpuFeatures {
  // AVX2 + FMA + F16C, with OS-saved YMM state.
  bool avx2 = false;
  // AVX-VNNI (VEX vpdpbusd) + the above.
  bool avx_vnni = false;
  // AVX-512 F/BW/VL/DQ/VNNI + the above, OS-saved ZMM state.
  bool avx512 = false;
  // AMX-TILE + AMX-INT8 + the above, tile state granted.
  bool amx = false;
};

uint64_t ReadXcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

// CPUID directly rather than __builtin_cpu_supports: clang lacks "f16c"
// there, and we need the XCR0 check for OS support either way.
CpuFeatures DetectCpu() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool fma = ecx & (1u << 12);
  const bool osxsave = ecx & (1u << 27);
  const bool avx = ecx & (1u << 28);
  const bool f16c = ecx & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = ReadXcr0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  const bool avx2 = ebx & (1u << 5);
  const bool avx512f = ebx & (1u << 16);
  const bool avx512dq = ebx & (1u << 17);
  const bool avx512bw = ebx & (1u << 30);
  const bool avx512vl = ebx & (1u << 31);
  const bool avx512vnni = ecx & (1u << 11);
  const bool amx_tile = edx & (1u << 24);
  const bool amx_int8 = edx & (1u << 25);
  const bool os_tiles = (xcr0 & 0x60000) == 0x60000;
  f.avx2 = os_ymm && avx2 && fma && f16c;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
    f.avx_vnni = f.avx2 && (eax & (1u << 4));
  f.avx512 = f.avx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl &&
             avx512vnni;
  f.amx = f.avx512 && amx_tile && amx_int8 && os_tiles &&
          amx::RequestTilePermission();
  return f;
}

bool Supported(Isa isa) {
  static const CpuFeatures features = DetectCpu();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return features.avx2;
    case Isa::kAvxVnni:
      return features.avx_vnni;
    case Isa::kAvx512:
      return features.avx512;
    case Isa::kAmx:
      return features.amx;
  }
  return false;
}

KernelTable MakeTable(Isa isa) {
  KernelTable table;
  switch (isa) {
    case Isa::kScalar:
      ref::FillTable(&table);
      break;
    case Isa::kAvx2:
      avx2::FillTable(&table);
      break;
    case Isa::kAvxVnni:
      avxvnni::FillTable(&table);
      break;
    case Isa::kAvx512:
      avx512::FillTable(&table);
      break;
    case Isa::kAmx:
      amx::FillTable(&table);
      break;
  }
  return table;
}

// Tables are built once each, on first use, and never freed.
const KernelTable* TableFor(Isa isa) {
  static const KernelTable scalar = MakeTable(Isa::kScalar);
  switch (isa) {
    case Isa::kScalar:
      return &scalar;
    case Isa::kAvx2: {
      static const KernelTable avx2 = MakeTable(Isa::kAvx2);
      return &avx2;
    }
    case Isa::kAvxVnni: {
      static const KernelTable avx_vnni = MakeTable(Isa::kAvxVnni);
      return &avx_vnni;
    }
    case Isa::kAvx512: {
      static const KernelTable avx512 = MakeTable(Isa::kAvx512);
      return &avx512;
    }
    case Isa::kAmx: {
      static const KernelTable amx = MakeTable(Isa::kAmx);
      return &amx;
    }
  }
  return &scalar;
}

constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni,
                            Isa::kAvx512, Isa::kAmx};

// AMX is opt-in (RL_FORCE_ISA=amx): its products match the reference
// exactly, but on repacked weights its prefill measured at most ~5 % faster
// than AVX-512 (bench-model pp128/pp512, qwen2.5-0.5b and llama3.2-1b), not
// enough to make every default run depend on the OS granting tile state.
Isa BestIsa() {
  if (Supported(Isa::kAvx512)) return Isa::kAvx512;
  if (Supported(Isa::kAvxVnni)) return Isa::kAvxVnni;
  if (Supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

Isa InitialIsa() {
  const char* env = std::getenv("RL_FORCE_ISA");
  if (env == nullptr || *env == '\0') return BestIsa();
  const std::string_view name(env);
  for (Isa isa : kAllIsas) {
    if (name != IsaName(isa)) continue;
    if (Supported(isa)) return isa;
    std::fprintf(stderr, "RL_FORCE_ISA=%s: this CPU cannot run it; using %s\n",
                 env, IsaName(BestIsa()).data());
    return BestIsa();
  }
  std::fprintf(stderr,
               "RL_FORCE_ISA=%s: unknown (scalar|avx2|avxvnni|avx512|amx); "
               "using %s\n",
               env, IsaName(BestIsa()).data());
  return BestIsa();
}

std::atomic<const KernelTable*>& ActivePointer() {
  static std::atomic<const KernelTable*> active{TableFor(InitialIsa())};
  return active;
}

}  // namespace

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvxVnni:
      return "avxvnni";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAmx:
      return "amx";
  }
  return "?";
}

std::vector<Isa> AvailableIsas() {
  std::vector<Isa> isas;
  for (Isa isa : kAllIsas) {
    if (Supported(isa)) isas.push_back(isa);
  }
  return isas;
}

Isa ActiveIsa() { return ActiveKernels().isa; }

bool SetActiveIsa(Isa isa) {
  if (!Supported(isa)) return false;
  ActivePointer().store(TableFor(isa), std::memory_order_release);
  return true;
}

const KernelTable& ActiveKernels() {
  return *ActivePointer().load(std::memory_order_acquire);
}

}  // namespace redline::kernels
