// The AVX2 products on packed Q2_K ... Q6_K weights built again for CPUs
// with AVX-VNNI and no AVX-512: matmul_kpacked_avx2.cc compiled with AVX2 +
// FMA + F16C + AVX-VNNI flags, where __AVXVNNI__ puts it in namespace
// avxvnni and turns its group sums into vpdpbusd chains.
#include "kernels/x86/matmul_kpacked_avx2.cc"
