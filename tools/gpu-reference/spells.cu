// spells.cu: do small pinned copies run in spells, and does a repetition of several latched
// batches make a case's median repeat? Plain CUDA (runtime API; no code of crates/bench-cuda).
//
// usage: spells [SIZE=128K] [h2d|d2h] [CASES=16] [LONG=300]
//
// Prints LONG back-to-back latched batches of 256 copies (GB/s each: the spells), then CASES
// "cases", each after a 60 ms pause: 12 repetitions of one batch (after 3 settling), then 12
// repetitions of M batches, M making about 20 ms of copying (after 2 settling); each case's
// two medians and spreads, and the spread of the medians over the cases.
#include "cuda_common.cuh"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <vector>

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static double spread_pct(const std::vector<double> &v) {
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return (*hi - *lo) / median(v) * 100;
}

static void summary(const char *name, std::vector<double> v) {
  double mean = 0, ss = 0;
  for (double x : v) mean += x;
  mean /= v.size();
  for (double x : v) ss += (x - mean) * (x - mean);
  std::sort(v.begin(), v.end());
  printf(" | %s: min %.2f median %.2f max %.2f sd %.2f", name, v.front(), v[v.size() / 2],
         v.back(), std::sqrt(ss / std::max<size_t>(1, v.size() - 1)));
}

int main(int argc, char **argv) {
  size_t size = argc > 1 ? parse_size(argv[1]) : 128 << 10;
  bool d2h = argc > 2 && std::string(argv[2]) == "d2h";
  int cases = argc > 3 ? atoi(argv[3]) : 16;
  int long_batches = argc > 4 ? atoi(argv[4]) : 300;
  const int k = 256;
  const size_t bytes = 64ull << 20;
  if (size == 0 || size > bytes || cases < 1) {
    fprintf(stderr, "usage: spells [SIZE<=64M] [h2d|d2h] [CASES>=1] [LONG]\n");
    return 2;
  }
  char *host = (char *)mmap_registered(bytes);
  char *dev;
  CK(cudaMalloc(&dev, bytes));
  int *flag, *dflag;
  CK(cudaHostAlloc((void **)&flag, 64, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer((void **)&dflag, flag, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // One latched batch of k copies: its event span in ms.
  auto batch = [&]() {
    flag[0] = 0;
    flag[1] = 0;
    spin_kernel<<<1, 1, 0, s>>>(dflag, kSpinTimeoutNs);
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < k; i++)
      CK(cudaMemcpyAsync(d2h ? host : dev, d2h ? dev : host, size,
                         d2h ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s));
    CK(cudaEventRecord(e1, s));
    __sync_synchronize();
    ((volatile int *)flag)[0] = 1;
    CK(cudaEventSynchronize(e1));
    if (flag[1]) {
      fprintf(stderr, "spells: the latch timed out\n");
      exit(2);
    }
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return (double)ms;
  };
  // A repetition of m batches: GB/s over the sum of their spans.
  auto rep = [&](int m) {
    double ms = 0;
    for (int i = 0; i < m; i++) ms += batch();
    return size * (double)k * m / ms / 1e6;
  };
  for (int i = 0; i < 50; i++) batch();
  printf("size %zu KiB %s, %d copies a batch\nlong:", size >> 10, d2h ? "d2h" : "h2d", k);
  for (int i = 0; i < long_batches; i++) printf(" %.1f", rep(1));
  double one_ms = batch();
  int m = std::max(1, (int)std::ceil(20.0 / one_ms));
  printf("\none batch %.2f ms; M = %d batches a repetition\n", one_ms, m);
  std::vector<double> one, many;
  for (int c = 0; c < cases; c++) {
    usleep(60000);
    std::vector<double> a, b;
    for (int i = 0; i < 3; i++) rep(1);
    for (int i = 0; i < 12; i++) a.push_back(rep(1));
    usleep(60000);
    for (int i = 0; i < 2; i++) rep(m);
    for (int i = 0; i < 12; i++) b.push_back(rep(m));
    printf("case %2d  1 batch: median %.2f spread %.1f%%   %d batches: median %.2f spread %.1f%%\n",
           c, median(a), spread_pct(a), m, median(b), spread_pct(b));
    one.push_back(median(a));
    many.push_back(median(b));
  }
  printf("medians over %d cases", cases);
  summary("1 batch", one);
  summary("M batches", many);
  printf("\n");
  return 0;
}
