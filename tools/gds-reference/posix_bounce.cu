// The plain reference for hwceiling's POSIX bounce baseline (Path 6): QD threads, each with its
// own pinned host buffer (cudaHostAlloc), CUDA stream and slot of one device buffer, each reading
// BLOCK bytes with an O_DIRECT pread and copying them to the GPU (cudaMemcpyAsync, then
// cudaStreamSynchronize), over the file's blocks in order, each thread taking the next block
// when it is free (a shared counter, as hwceiling's engine and kvikio's task pool do).
// A repetition reads BYTES (in whole rounds of QD blocks); its time runs from the first thread's
// start to the last thread's end. One untimed repetition first.
//
//   posix_bounce FILE BLOCK_BYTES QD BYTES REPS    → CSV lines: posix-ref,BLOCK,QD,REP,GBPS
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <thread>
#include <unistd.h>
#include <vector>

#define CHECK(x)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                    \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

using Clock = std::chrono::steady_clock;

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: posix_bounce FILE BLOCK_BYTES QD BYTES REPS\n");
    return 2;
  }
  const char *path = argv[1];
  size_t block = strtoull(argv[2], nullptr, 10);
  int qd = atoi(argv[3]);
  size_t bytes = strtoull(argv[4], nullptr, 10);
  int reps = atoi(argv[5]);
  int fd = open(path, O_RDONLY | O_DIRECT);
  if (fd < 0) { perror(path); return 1; }
  off_t size = lseek(fd, 0, SEEK_END);
  size_t blocks = size / block;
  size_t per_thread = bytes / block / qd;
  if (per_thread == 0 || blocks == 0) { fprintf(stderr, "file too small\n"); return 1; }
  CHECK(cudaSetDevice(0));
  char *dev;
  CHECK(cudaMalloc(&dev, block * qd));
  std::vector<void *> host(qd);
  std::vector<cudaStream_t> streams(qd);
  for (int t = 0; t < qd; t++) {
    CHECK(cudaHostAlloc(&host[t], block, cudaHostAllocDefault));
    CHECK(cudaStreamCreateWithFlags(&streams[t], cudaStreamNonBlocking));
  }
  for (int rep = 0; rep <= reps; rep++) {
    std::atomic<int> ready{0};
    std::atomic<size_t> next{0};
    std::vector<Clock::time_point> start(qd), end(qd);
    std::vector<std::thread> threads;
    for (int t = 0; t < qd; t++) {
      threads.emplace_back([&, t] {
        CHECK(cudaSetDevice(0));
        ready.fetch_add(1);
        while (ready.load() < qd) {
        }
        start[t] = Clock::now();
        for (size_t k; (k = next.fetch_add(1)) < per_thread * qd;) {
          off_t off = (off_t)((k % blocks) * block);
          if (pread(fd, host[t], block, off) != (ssize_t)block) { perror("pread"); exit(1); }
          CHECK(cudaMemcpyAsync(dev + t * block, host[t], block, cudaMemcpyHostToDevice, streams[t]));
          CHECK(cudaStreamSynchronize(streams[t]));
        }
        end[t] = Clock::now();
      });
    }
    for (auto &th : threads) th.join();
    auto first = start[0], last = end[0];
    for (int t = 1; t < qd; t++) {
      if (start[t] < first) first = start[t];
      if (end[t] > last) last = end[t];
    }
    double s = std::chrono::duration<double>(last - first).count();
    double moved = (double)per_thread * qd * block;
    if (rep > 0) printf("posix-ref,%zu,%d,%d,%.4f\n", block, qd, rep, moved / s / 1e9);
  }
  return 0;
}
