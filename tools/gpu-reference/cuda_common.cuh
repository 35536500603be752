// cuda_common.cuh: what ref_bw.cu and duplex_recipes.cu share (plain CUDA, runtime API; no code
// of crates/bench-cuda): the error check, the spin-kernel latch, and the size parser.
#pragma once

#include <cuda_runtime.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

// Run a CUDA runtime call; on failure print where and why on one line and exit 2.
#define CK(call)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                \
              cudaGetErrorString(e_));                                             \
      exit(2);                                                                     \
    }                                                                              \
  } while (0)

// How long a latch spins before it gives up (a queue that cannot take all the copies).
static const unsigned long long kSpinTimeoutNs = 1000000000ull;

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until flag[0] is set by the host; marks flag[1] if it gave up first.
__global__ void spin_kernel(volatile int *flag, unsigned long long timeout_ns) {
  unsigned long long start = global_ns();
  while (flag[0] == 0) {
    if (global_ns() - start > timeout_ns) {
      flag[1] = 1;
      return;
    }
  }
}

// `512K`, `4M`, `1G` or a byte count.
static size_t parse_size(const std::string &s) {
  char *end = nullptr;
  double v = strtod(s.c_str(), &end);
  switch (end && *end ? *end : 'B') {
    case 'K': case 'k': return (size_t)(v * 1024);
    case 'M': case 'm': return (size_t)(v * 1024 * 1024);
    case 'G': case 'g': return (size_t)(v * 1024 * 1024 * 1024);
    default: return (size_t)v;
  }
}

// ref_bw's latched/register host memory: a fresh anonymous mapping of `len` bytes (a multiple
// of the page size), MADV_HUGEPAGE advice, touched, registered (portable). Free with
// cudaHostUnregister and munmap.
static void *mmap_registered(size_t len) {
  void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
  madvise(p, len, MADV_HUGEPAGE);
  memset(p, 0, len);
  CK(cudaHostRegister(p, len, cudaHostRegisterPortable));
  return p;
}
