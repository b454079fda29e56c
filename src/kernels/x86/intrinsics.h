// Includes <immintrin.h> for the x86/ ISA translation units only, never from
// a shared header: shared headers hold no code that needs an ISA, because an
// inline function there, compiled in an ISA unit with its flags, may be the
// copy the linker keeps for baseline callers too (kernels/kernel_table.h).
//
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 headers
// (_mm512_undefined_* initialise a variable from itself, used by the
// reductions and unmasked conversions); the pragmas silence those false
// positives for the header lines only, not for our code.
#ifndef REDLINE_KERNELS_X86_INTRINSICS_H_
#define REDLINE_KERNELS_X86_INTRINSICS_H_

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

#endif  // REDLINE_KERNELS_X86_INTRINSICS_H_
