// duplex_recipes.cu: which of hwceiling's buffer and issue habits cost a small duplex pair
// against ref_bw's, compared inside one process.
//
// Why inside one process: a small duplex pair's rate on an H200 has a level that belongs to
// the CUDA context it runs in (tools/gpu-reference/README.md, session 8, probe pp11: 74.0-78.1
// GB/s both directions together from one context to the next, each steady within +-0.5 %), so
// two recipes run in two processes compare two contexts as much as two recipes. Here every
// combination runs in the same (primary) context, interleaved in a shuffled order, with fresh
// draws each time.
//
// Factors (each combination is measured `--draws` times):
//   host    exact       a fresh mmap of the copy's size, MADV_HUGEPAGE advice, memset,
//                       cudaHostRegister(PORTABLE) per draw (ref_bw's latched/register)
//           exact_small as exact, but MADV_NOHUGEPAGE (small pages) and pre-faulted a page
//                       at a time
//           slice       one 4.5 MiB + size region per process, MADV_NOHUGEPAGE, pre-faulted a
//                       page at a time, registered once; each draw at random 64 KiB offsets
//                       (hwceiling's searching cases)
//           slice_huge  as slice, but MADV_HUGEPAGE and memset
//           mallochost  cudaMallocHost per draw (ref_bw's latched/mallochost)
//   device  exact       a fresh cudaMalloc of the copy's size per end per draw (ref_bw)
//           slice       one 256 MiB + 4 MiB allocation per end per process; the D2H source at a
//                       random 64 KiB offset per draw, the H2D destination at 0 (hwceiling)
//   latch   per_stream  a spin kernel on each stream, each records its own start (ref_bw)
//           one_wait    one spin kernel on the H2D stream, the D2H stream waits on an event
//                       recorded after it (hwceiling)
//   pin     free        the issuing thread where the kernel put it (ref_bw)
//           pinned      the issuing thread pinned to the CPUs of the GPU's NUMA node (hwceiling)
// Copies carry pseudo-random data. Per draw: 2 settling repetitions, then the median of 5 of
// K copies per stream, GB/s = 1e9 B/s, both directions' bytes over their own event spans.
//
// Output: one CSV row per draw (draw,host,device,latch,pin,sum_gbps,h2d_gbps,d2h_gbps), then
// per factor level the median of every draw with that level ("marginal"), then per
// combination its median.
//
// Build: nvcc -O2 -std=c++17 -arch=native -o duplex_recipes duplex_recipes.cu
// Usage: duplex_recipes [--size 512K] [--draws 3] [--k 256] [--gpu 0]
//                       [--host exact,slice,...] [--device ...] [--latch ...] [--pin ...]
//        (each of the last four keeps only the listed levels of that factor; default all)
//        (run it with CUDA_DEVICE_MAX_CONNECTIONS=32, as hwceiling asks the driver for)

#include "cuda_common.cuh"

#include <cuda_runtime.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

static const size_t kKiB = 1024;
static const size_t kRegionExtra = 4 << 20;      // room for the host slices' offsets
static const size_t kDeviceSlice = 256u << 20;   // the pooled device buffers' size
static const size_t kOffsetStep = 64 * kKiB;

static void launch_spin(cudaStream_t s, int *dflag) {
  spin_kernel<<<1, 1, 0, s>>>(dflag, kSpinTimeoutNs);
  CK(cudaGetLastError());
}

static void fill_random(void *p, size_t n, uint64_t seed) {
  uint64_t *w = (uint64_t *)p;
  for (size_t i = 0; i < n / 8; i++) w[i] = (seed ^ i) * 0x9E3779B97F4A7C15ull;
}

// CPUs of `node` from sysfs ("0-15,32-47"); empty if unreadable.
static std::vector<int> node_cpus(int node) {
  std::ifstream f("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
  std::string list, part;
  std::vector<int> cpus;
  if (!std::getline(f, list)) return cpus;
  std::stringstream ss(list);
  while (std::getline(ss, part, ',')) {
    int a = 0, b = 0;
    if (sscanf(part.c_str(), "%d-%d", &a, &b) == 2) {
      for (int c = a; c <= b; c++) cpus.push_back(c);
    } else if (sscanf(part.c_str(), "%d", &a) == 1) {
      cpus.push_back(a);
    }
  }
  return cpus;
}

struct Combo {
  int host, device, latch, pin;
};
static const char *kHost[] = {"exact", "exact_small", "slice", "slice_huge", "mallochost"};
enum { kExact, kExactSmall, kSlice, kSliceHuge, kMallocHost, kHosts };
static const char *kDevice[] = {"exact", "slice"};
static const char *kLatch[] = {"per_stream", "one_wait"};
static const char *kPin[] = {"free", "pinned"};

static double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Level indices of `levels` named in the comma list `list`; -1 in the result for an unknown name.
static std::vector<int> pick_levels(const std::string &list, const char *const *levels, int n) {
  std::vector<int> out;
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    int found = -1;
    for (int l = 0; l < n; l++)
      if (name == levels[l]) found = l;
    out.push_back(found);
  }
  return out;
}

// Plain memory of `len` bytes with `advice`, pre-faulted a page at a time, registered.
static char *map_registered(size_t len, int advice) {
  char *p = (char *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
  madvise(p, len, advice);
  for (size_t o = 0; o < len; o += 4096) ((volatile char *)p)[o] = 0;
  CK(cudaHostRegister(p, len, cudaHostRegisterPortable));
  return p;
}

int main(int argc, char **argv) {
  size_t size = 512 * kKiB;
  int draws = 3, k = 256, gpu = 0;
  std::vector<int> want[4];
  const char *const *names[4] = {kHost, kDevice, kLatch, kPin};
  const int counts[4] = {kHosts, 2, 2, 2};
  const char *flags[4] = {"--host", "--device", "--latch", "--pin"};
  for (int f = 0; f < 4; f++)
    for (int l = 0; l < counts[f]; l++) want[f].push_back(l);
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i], v = argv[i + 1];
    int factor = -1;
    for (int f = 0; f < 4; f++)
      if (key == flags[f]) factor = f;
    if (factor >= 0) {
      want[factor] = pick_levels(v, names[factor], counts[factor]);
      for (int l : want[factor])
        if (l < 0) {
          fprintf(stderr, "unknown level in %s %s\n", key.c_str(), v.c_str());
          return 2;
        }
    } else if (key == "--size") size = parse_size(v);
    else if (key == "--draws") draws = atoi(v.c_str());
    else if (key == "--k") k = atoi(v.c_str());
    else if (key == "--gpu") gpu = atoi(v.c_str());
    else {
      fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  if (size == 0 || size % kOffsetStep != 0 || draws < 1 || k < 1) {
    fprintf(stderr, "--size must be a positive multiple of 64K; --draws and --k positive\n");
    return 2;
  }
  CK(cudaSetDevice(gpu));
  int node = -1;
  {
    char bus[32];
    CK(cudaDeviceGetPCIBusId(bus, sizeof bus, gpu));
    std::string id(bus);
    for (auto &c : id) c = (char)tolower(c);
    std::ifstream f("/sys/bus/pci/devices/" + id + "/numa_node");
    f >> node;
  }
  std::vector<int> cpus = node_cpus(node < 0 ? 0 : node);
  cpu_set_t all_cpus;
  CPU_ZERO(&all_cpus);
  sched_getaffinity(0, sizeof all_cpus, &all_cpus);
  cpu_set_t node_set;
  CPU_ZERO(&node_set);
  for (int c : cpus) CPU_SET(c, &node_set);

  int *flag = nullptr, *dflag = nullptr;
  CK(cudaHostAlloc((void **)&flag, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  CK(cudaHostGetDevicePointer((void **)&dflag, flag, 0));
  cudaStream_t s[2];
  cudaEvent_t start[2], end[2], started;
  for (int i = 0; i < 2; i++) {
    CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    CK(cudaEventCreate(&start[i]));
    CK(cudaEventCreate(&end[i]));
  }
  CK(cudaEventCreateWithFlags(&started, cudaEventDisableTiming));

  // Warm the clocks: 0.3 s of large H2D and D2D copies, as ref_bw does.
  {
    size_t n = 64 << 20;
    void *h, *a, *b;
    CK(cudaMallocHost(&h, n));
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 0.3) {
      for (int i = 0; i < 4; i++) {
        CK(cudaMemcpyAsync(a, h, n, cudaMemcpyHostToDevice, s[0]));
        CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s[1]));
      }
      CK(cudaDeviceSynchronize());
    }
    CK(cudaFreeHost(h));
    CK(cudaFree(a));
    CK(cudaFree(b));
  }

  // The per-process buffers of the "slice" recipes.
  size_t region = size + kRegionExtra;
  char *region_src = map_registered(region, MADV_NOHUGEPAGE);
  char *region_dst = map_registered(region, MADV_NOHUGEPAGE);
  char *huge_src = map_registered(region, MADV_HUGEPAGE);
  char *huge_dst = map_registered(region, MADV_HUGEPAGE);
  fill_random(region_src, region, 1);
  fill_random(huge_src, region, 1);
  char *pool_src = nullptr, *pool_dst = nullptr;
  CK(cudaMalloc(&pool_src, kDeviceSlice + kRegionExtra));
  CK(cudaMalloc(&pool_dst, kDeviceSlice + kRegionExtra));
  {
    std::vector<char> t(kDeviceSlice + kRegionExtra);
    fill_random(t.data(), t.size(), 2);
    CK(cudaMemcpy(pool_src, t.data(), t.size(), cudaMemcpyHostToDevice));
  }
  std::vector<char> staging(size);
  fill_random(staging.data(), size, 3);

  std::vector<Combo> combos;
  for (int h : want[0])
    for (int d : want[1])
      for (int l : want[2])
        for (int p : want[3]) combos.push_back({h, d, l, p});
  std::mt19937_64 rng((uint64_t)getpid() * 0x9E3779B97F4A7C15ull);
  auto offset = [&]() { return (size_t)(rng() % (kRegionExtra / kOffsetStep + 1)) * kOffsetStep; };

  struct Row {
    Combo c;
    double sum, h2d, d2h;
  };
  std::vector<Row> rows;
  int timeouts = 0;
  printf("draw,host,device,latch,pin,sum_gbps,h2d_gbps,d2h_gbps\n");
  for (int draw = 0; draw < draws; draw++) {
    std::shuffle(combos.begin(), combos.end(), rng);
    for (const Combo &c : combos) {
      // Host ends.
      char *hs = nullptr, *hd = nullptr;
      auto host_alloc = [&](uint64_t seed) -> char * {
        char *p = nullptr;
        if (c.host == kExact) {
          p = (char *)mmap_registered(size);
        } else if (c.host == kExactSmall) {
          p = map_registered(size, MADV_NOHUGEPAGE);
        } else {
          CK(cudaMallocHost((void **)&p, size));
          memset(p, 0, size);
        }
        fill_random(p, size, seed);
        return p;
      };
      if (c.host == kSlice) {
        hs = region_src + offset();
        hd = region_dst + offset();
      } else if (c.host == kSliceHuge) {
        hs = huge_src + offset();
        hd = huge_dst + offset();
      } else {
        hs = host_alloc(4);
        hd = host_alloc(5);
      }
      // Device ends.
      char *dd = nullptr, *ds = nullptr;
      if (c.device == 0) {
        CK(cudaMalloc(&dd, size));
        CK(cudaMalloc(&ds, size));
        CK(cudaMemcpy(ds, staging.data(), size, cudaMemcpyHostToDevice));
      } else {
        dd = pool_dst;
        ds = pool_src + offset();
      }
      if (c.pin == 1 && !cpus.empty()) sched_setaffinity(0, sizeof node_set, &node_set);
      auto rep = [&](double *h2d, double *d2h) {
        ((volatile int *)flag)[0] = 0;
        ((volatile int *)flag)[1] = 0;
        if (c.latch == 0) {
          for (int i = 0; i < 2; i++) {
            launch_spin(s[i], dflag);
            CK(cudaEventRecord(start[i], s[i]));
          }
        } else {
          launch_spin(s[0], dflag);
          CK(cudaEventRecord(start[0], s[0]));
          CK(cudaEventRecord(started, s[0]));
          CK(cudaStreamWaitEvent(s[1], started, 0));
          CK(cudaEventRecord(start[1], s[1]));
        }
        for (int i = 0; i < k; i++) {
          CK(cudaMemcpyAsync(dd, hs, size, cudaMemcpyHostToDevice, s[0]));
          CK(cudaMemcpyAsync(hd, ds, size, cudaMemcpyDeviceToHost, s[1]));
        }
        for (int i = 0; i < 2; i++) CK(cudaEventRecord(end[i], s[i]));
        __sync_synchronize();
        ((volatile int *)flag)[0] = 1;
        for (int i = 0; i < 2; i++) CK(cudaEventSynchronize(end[i]));
        if (((volatile int *)flag)[1]) timeouts++;
        float ms[2];
        for (int i = 0; i < 2; i++) CK(cudaEventElapsedTime(&ms[i], start[i], end[i]));
        *h2d = (double)size * k / (ms[0] * 1e-3) / 1e9;
        *d2h = (double)size * k / (ms[1] * 1e-3) / 1e9;
      };
      double a, b;
      for (int i = 0; i < 2; i++) rep(&a, &b);
      std::vector<double> sums, h2ds, d2hs;
      for (int i = 0; i < 5; i++) {
        rep(&a, &b);
        sums.push_back(a + b);
        h2ds.push_back(a);
        d2hs.push_back(b);
      }
      sched_setaffinity(0, sizeof all_cpus, &all_cpus);
      Row r{c, median(sums), median(h2ds), median(d2hs)};
      rows.push_back(r);
      printf("%d,%s,%s,%s,%s,%.3f,%.3f,%.3f\n", draw, kHost[c.host], kDevice[c.device],
             kLatch[c.latch], kPin[c.pin], r.sum, r.h2d, r.d2h);
      fflush(stdout);
      if (c.device == 0) {
        CK(cudaFree(dd));
        CK(cudaFree(ds));
      }
      for (char *p : {hs, hd}) {
        if (c.host == kExact || c.host == kExactSmall) {
          CK(cudaHostUnregister(p));
          munmap(p, size);
        } else if (c.host == kMallocHost) {
          CK(cudaFreeHost(p));
        }
      }
    }
  }
  if (timeouts) printf("# latch timeouts: %d (K too large for the driver's queue)\n", timeouts);

  // Marginals: every draw with a given level of a factor, whatever the other factors.
  auto marginal = [&](const char *name, const char *const *levels, int n, int Combo::*f) {
    for (int l = 0; l < n; l++) {
      std::vector<double> v;
      for (auto &r : rows)
        if (r.c.*f == l) v.push_back(r.sum);
      if (v.empty()) continue;  // a level left out with --host/--device/--latch/--pin
      printf("# marginal %s=%s: median %.3f over %zu draws\n", name, levels[l], median(v), v.size());
    }
  };
  marginal("host", kHost, kHosts, &Combo::host);
  marginal("device", kDevice, 2, &Combo::device);
  marginal("latch", kLatch, 2, &Combo::latch);
  marginal("pin", kPin, 2, &Combo::pin);
  std::map<std::string, std::vector<double>> by;
  for (auto &r : rows) {
    std::string key = std::string(kHost[r.c.host]) + "/" + kDevice[r.c.device] + "/" +
                      kLatch[r.c.latch] + "/" + kPin[r.c.pin];
    by[key].push_back(r.sum);
  }
  for (auto &kv : by)
    printf("# combo %-40s median %.3f over %zu draws\n", kv.first.c_str(), median(kv.second),
           kv.second.size());
  return 0;
}
