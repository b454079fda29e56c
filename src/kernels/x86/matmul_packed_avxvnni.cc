// The AVX2 panel products built again for CPUs with AVX-VNNI and no
// AVX-512 (Intel's client cores from Alder Lake on): matmul_packed_avx2.cc
// compiled with AVX2 + FMA + F16C + AVX-VNNI flags, where __AVXVNNI__ puts it
// in namespace avxvnni and turns its block dots into vpdpbusd chains. Its
// table is the AVX2 one with these panel products, and the K-quant ones of
// matmul_kpacked_avxvnni.cc, in place of AVX2's.
#include "kernels/x86/matmul_packed_avx2.cc"

namespace redline::kernels::avxvnni {

void FillTable(KernelTable* table) {
  avx2::FillTable(table);
  FillPackedMatMulTable(table);
  FillKPackedMatMulTable(table);
  table->isa = Isa::kAvxVnni;
}

}  // namespace redline::kernels::avxvnni
