// ref_bw.cu: an independent plain-CUDA (runtime API) reference for hwceiling's GPU copy paths.
//
// It shares no code with crates/bench-cuda. For each test, size, stream count and method it
// prints one CSV row: the median, min, max and spread of N timed repetitions after W warm-up
// ones, in GB/s (1e9 B/s), counting bytes copied.
//
// Methods (column `method`):
//   latched/mallochost  nvbandwidth's way: each stream waits behind a spin kernel on a
//                       host-mapped flag, records a start event, queues K copies, records an end
//                       event; the host opens the flag once everything is queued. Time = the
//                       union of the streams' event spans. Host memory from cudaMallocHost.
//   latched/register    the same with host memory from mmap + MADV_HUGEPAGE + cudaHostRegister,
//                       the kind of memory hwceiling uses.
//   wall/mallochost     no latch: K copies queued back to back on each stream, host wall clock
//                       from the first enqueue to the last stream's completion (the anchors'
//                       first method).
//   wall/pageable       the same from malloc'd (pageable) memory.
//
// Build: nvcc -O2 -std=c++17 -arch=native -o ref_bw ref_bw.cu
// Usage: ref_bw [--gpu N] [--reps N] [--warmup N] [--sizes 128K,4M,256M]
//               [--tests h2d,d2h,duplex,d2d,h2d_pageable,d2h_pageable] [--streams 1,4]
//               [--methods latched/mallochost,latched/register,wall/mallochost]

#include "cuda_common.cuh"

#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static const int kMinCopies = 2;
static const int kMaxCopies = 1024;

enum class HostKind { MallocHost, Register, Pageable };
enum class Dir { H2D, D2H, D2D };

struct Stats {
  double median, min, max, spread_pct;
  int n;
};

static Stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Stats s{};
  s.n = (int)v.size();
  if (v.empty()) return s;
  size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  s.spread_pct = (s.max - s.min) / s.median * 100.0;
  return s;
}

static size_t page_round(size_t n) { return (n + 4095) & ~(size_t)4095; }

static void *alloc_host(HostKind kind, size_t size) {
  void *p = nullptr;
  size_t len = page_round(size);
  switch (kind) {
    case HostKind::MallocHost:
      CK(cudaMallocHost(&p, len));
      break;
    case HostKind::Register:
      p = mmap_registered(len);
      break;
    case HostKind::Pageable:
      p = aligned_alloc(4096, len);
      if (!p) {
        perror("aligned_alloc");
        exit(2);
      }
      break;
  }
  memset(p, 0, len);
  return p;
}

static void free_host(HostKind kind, void *p, size_t size) {
  switch (kind) {
    case HostKind::MallocHost:
      CK(cudaFreeHost(p));
      break;
    case HostKind::Register:
      CK(cudaHostUnregister(p));
      munmap(p, page_round(size));
      break;
    case HostKind::Pageable:
      free(p);
      break;
  }
}

static void fill(void *p, size_t size, uint64_t seed) {
  uint64_t *w = (uint64_t *)p;
  for (size_t i = 0; i < size / 8; i++) w[i] = (seed ^ i) * 0x9E3779B97F4A7C15ull;
}

struct Lane {
  cudaStream_t stream;
  cudaEvent_t start, end;
  Dir dir;
  int group;
  void *host = nullptr;
  void *dev = nullptr;
  void *dev2 = nullptr;  // D2D destination
};

struct Case {
  std::string test;
  size_t size;
  int streams;
  bool latched;
  HostKind host;
  std::vector<Lane> lanes;
  int groups = 1;
  int copies = 1;
};

static int *g_flag = nullptr;   // host view
static int *g_dflag = nullptr;  // device view
static int g_timeouts = 0;

static void copy(const Lane &l, size_t size) {
  switch (l.dir) {
    case Dir::H2D:
      CK(cudaMemcpyAsync(l.dev, l.host, size, cudaMemcpyHostToDevice, l.stream));
      break;
    case Dir::D2H:
      CK(cudaMemcpyAsync(l.host, l.dev, size, cudaMemcpyDeviceToHost, l.stream));
      break;
    case Dir::D2D:
      CK(cudaMemcpyAsync(l.dev2, l.dev, size, cudaMemcpyDeviceToDevice, l.stream));
      break;
  }
}

// One repetition; returns GB/s per group.
static std::vector<double> run_rep(Case &c) {
  std::vector<double> gbps(c.groups, 0.0);
  std::vector<double> bytes(c.groups, 0.0);
  for (auto &l : c.lanes) bytes[l.group] += (double)c.size * c.copies;
  if (c.latched) {
    ((volatile int *)g_flag)[0] = 0;
    ((volatile int *)g_flag)[1] = 0;
    for (auto &l : c.lanes) {
      spin_kernel<<<1, 1, 0, l.stream>>>(g_dflag, kSpinTimeoutNs);
      CK(cudaGetLastError());
      CK(cudaEventRecord(l.start, l.stream));
    }
    for (int k = 0; k < c.copies; k++)
      for (auto &l : c.lanes) copy(l, c.size);
    for (auto &l : c.lanes) CK(cudaEventRecord(l.end, l.stream));
    __sync_synchronize();
    ((volatile int *)g_flag)[0] = 1;
    for (auto &l : c.lanes) CK(cudaEventSynchronize(l.end));
    if (((volatile int *)g_flag)[1]) g_timeouts++;
    for (int g = 0; g < c.groups; g++) {
      double first = 1e30, last = -1e30;
      for (auto &l : c.lanes) {
        if (l.group != g) continue;
        float s = 0, e = 0;
        CK(cudaEventElapsedTime(&s, c.lanes[0].start, l.start));
        CK(cudaEventElapsedTime(&e, c.lanes[0].start, l.end));
        first = std::min(first, (double)s);
        last = std::max(last, (double)e);
      }
      gbps[g] = bytes[g] / ((last - first) * 1e-3) / 1e9;
    }
  } else {
    CK(cudaDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < c.copies; k++)
      for (auto &l : c.lanes) copy(l, c.size);
    for (auto &l : c.lanes) CK(cudaStreamSynchronize(l.stream));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int g = 0; g < c.groups; g++) gbps[g] = bytes[g] / s / 1e9;
  }
  return gbps;
}

static int copies_for(size_t size, int streams, bool d2d) {
  // About 10 ms per repetition: 512 MiB per stream over PCIe (≈ 55 GB/s), 16 GiB on the device.
  double target = d2d ? 16.0 * (1ull << 30) : 512.0 * (1 << 20);
  int k = (int)std::ceil(target / (double)size);
  (void)streams;
  return std::max(kMinCopies, std::min(kMaxCopies, k));
}

static bool check_copy(const Lane &l, size_t size) {
  // Compare the first and last 4 KiB of what the copy produced with its source.
  size_t n = std::min<size_t>(4096, size);
  std::vector<char> a(n), b(n);
  for (int part = 0; part < 2; part++) {
    size_t off = part == 0 ? 0 : size - n;
    switch (l.dir) {
      case Dir::H2D:
        CK(cudaMemcpy(a.data(), (char *)l.dev + off, n, cudaMemcpyDeviceToHost));
        memcpy(b.data(), (char *)l.host + off, n);
        break;
      case Dir::D2H:
        CK(cudaMemcpy(b.data(), (char *)l.dev + off, n, cudaMemcpyDeviceToHost));
        memcpy(a.data(), (char *)l.host + off, n);
        break;
      case Dir::D2D:
        CK(cudaMemcpy(a.data(), (char *)l.dev2 + off, n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), (char *)l.dev + off, n, cudaMemcpyDeviceToHost));
        break;
    }
    if (memcmp(a.data(), b.data(), n) != 0) return false;
  }
  return true;
}

static void run_case(const std::string &test, const std::string &method, size_t size,
                     int streams, int warmup, int reps) {
  Case c;
  c.test = test;
  c.size = size;
  c.streams = streams;
  c.latched = method.rfind("latched", 0) == 0;
  c.host = method == "latched/register"  ? HostKind::Register
           : method == "wall/pageable"   ? HostKind::Pageable
                                         : HostKind::MallocHost;
  std::vector<std::pair<Dir, int>> dirs;
  std::vector<std::string> names;
  if (test == "h2d" || test == "h2d_pageable") {
    dirs = {{Dir::H2D, 0}};
    names = {test};
  } else if (test == "d2h" || test == "d2h_pageable") {
    dirs = {{Dir::D2H, 0}};
    names = {test};
  } else if (test == "duplex") {
    dirs = {{Dir::H2D, 0}, {Dir::D2H, 1}};
    names = {"duplex_h2d", "duplex_d2h"};
    c.groups = 2;
  } else if (test == "d2d") {
    dirs = {{Dir::D2D, 0}};
    names = {test};
  } else {
    fprintf(stderr, "unknown test %s\n", test.c_str());
    exit(2);
  }
  uint64_t seed = 1;
  for (auto &d : dirs) {
    for (int s = 0; s < streams; s++) {
      Lane l{};
      l.dir = d.first;
      l.group = d.second;
      CK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
      CK(cudaEventCreate(&l.start));
      CK(cudaEventCreate(&l.end));
      CK(cudaMalloc(&l.dev, size));
      if (l.dir == Dir::D2D) {
        CK(cudaMalloc(&l.dev2, size));
        std::vector<char> tmp(size);
        fill(tmp.data(), size, seed++);
        CK(cudaMemcpy(l.dev, tmp.data(), size, cudaMemcpyHostToDevice));
      } else {
        l.host = alloc_host(c.host, size);
        if (l.dir == Dir::H2D) {
          fill(l.host, size, seed++);
        } else {
          std::vector<char> tmp(size);
          fill(tmp.data(), size, seed++);
          CK(cudaMemcpy(l.dev, tmp.data(), size, cudaMemcpyHostToDevice));
        }
      }
      c.lanes.push_back(l);
    }
  }
  c.copies = copies_for(size, streams, test == "d2d");
  // Cold repetition. If the latch timed out, the driver's queue could not take all the copies
  // (the enqueue blocked until the spin kernel gave up): quarter K until it fits.
  bool k_reduced = false;
  for (;;) {
    int before = g_timeouts;
    run_rep(c);
    if (!c.latched || g_timeouts == before || c.copies <= kMinCopies) break;
    g_timeouts = before;
    c.copies = std::max(kMinCopies, c.copies / 4);
    k_reduced = true;
  }
  int timeouts_before = g_timeouts;
  bool ok = true;
  for (auto &l : c.lanes) ok = ok && check_copy(l, size);
  for (int i = 0; i < warmup; i++) run_rep(c);
  std::vector<std::vector<double>> samples(c.groups);
  for (int i = 0; i < reps; i++) {
    auto g = run_rep(c);
    for (int j = 0; j < c.groups; j++) samples[j].push_back(g[j]);
  }
  std::string flags = ok ? "" : "data_mismatch";
  if (k_reduced) flags += flags.empty() ? "k_reduced" : ";k_reduced";
  if (g_timeouts != timeouts_before) flags += flags.empty() ? "latch_timeout" : ";latch_timeout";
  for (int j = 0; j < c.groups; j++) {
    Stats s = summarize(samples[j]);
    printf("ref,%s,%zu,%d,%s,%.4f,%.4f,%.4f,%.3f,%d,%d,%s\n", names[j].c_str(), size, streams,
           method.c_str(), s.median, s.min, s.max, s.spread_pct, s.n, c.copies, flags.c_str());
  }
  fflush(stdout);
  CK(cudaDeviceSynchronize());
  for (auto &l : c.lanes) {
    if (l.host) free_host(c.host, l.host, size);
    CK(cudaFree(l.dev));
    if (l.dev2) CK(cudaFree(l.dev2));
    CK(cudaEventDestroy(l.start));
    CK(cudaEventDestroy(l.end));
    CK(cudaStreamDestroy(l.stream));
  }
}

static std::vector<std::string> split(const std::string &s) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a <= s.size()) {
    size_t b = s.find(',', a);
    if (b == std::string::npos) b = s.size();
    if (b > a) out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

// Keep the GPU busy ~300 ms so its clocks leave their idle state.
static void warm_clocks() {
  size_t n = 64 << 20;
  void *h, *a, *b;
  CK(cudaMallocHost(&h, n));
  CK(cudaMalloc(&a, n));
  CK(cudaMalloc(&b, n));
  cudaStream_t s1, s2;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 0.3) {
    for (int i = 0; i < 4; i++) {
      CK(cudaMemcpyAsync(a, h, n, cudaMemcpyHostToDevice, s1));
      CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s2));
    }
    CK(cudaStreamSynchronize(s1));
    CK(cudaStreamSynchronize(s2));
  }
  CK(cudaStreamDestroy(s1));
  CK(cudaStreamDestroy(s2));
  CK(cudaFreeHost(h));
  CK(cudaFree(a));
  CK(cudaFree(b));
}

int main(int argc, char **argv) {
  int gpu = 0, reps = 15, warmup = 3;
  std::vector<std::string> sizes = split("128K,512K,1M,2M,4M,8M,16M,32M,64M,256M");
  std::vector<std::string> tests = split("h2d,d2h,duplex,d2d");
  std::vector<std::string> streams = split("1");
  std::vector<std::string> methods = split("latched/mallochost,latched/register,wall/mallochost");
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--gpu") gpu = atoi(v.c_str());
    else if (k == "--reps") reps = atoi(v.c_str());
    else if (k == "--warmup") warmup = atoi(v.c_str());
    else if (k == "--sizes") sizes = split(v);
    else if (k == "--tests") tests = split(v);
    else if (k == "--streams") streams = split(v);
    else if (k == "--methods") methods = split(v);
    else {
      fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  CK(cudaSetDevice(gpu));
  CK(cudaHostAlloc((void **)&g_flag, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  CK(cudaHostGetDevicePointer((void **)&g_dflag, g_flag, 0));
  warm_clocks();
  for (auto &test : tests) {
    bool pageable = test.find("pageable") != std::string::npos;
    for (auto &m : methods) {
      // Pageable copies cannot wait behind a latch; pinned tests skip the pageable method.
      if (pageable != (m == "wall/pageable")) continue;
      if (test == "duplex" && m.rfind("wall", 0) == 0) continue;
      for (auto &st : streams)
        for (auto &sz : sizes) run_case(test, m, parse_size(sz), atoi(st.c_str()), warmup, reps);
    }
  }
  CK(cudaFreeHost(g_flag));
  return 0;
}
