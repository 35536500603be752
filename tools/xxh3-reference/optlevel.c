/*
 * One XXH3 code path of xxhash.h, hashing xxhsum -b's 100 KB block on one thread for 1 s,
 * three times, to compare compiler flags and block alignments (not a benchmark of hwceiling).
 * For example, the AVX-512 path at Debian's -O2 and at upstream's -O3:
 *
 *   gcc -O2 -DXXH_VECTOR=3 -mavx512f optlevel.c -o o2 && ./o2
 *   gcc -O3 -DXXH_VECTOR=3 -mavx512f optlevel.c -o o3 && ./o3
 *
 * Arguments: [64|128] [OFFSET]. 128 hashes XXH3-128 (XXH3_128bits) instead of XXH3-64. The
 * block starts OFFSET bytes past a page boundary (default 0; xxhsum -b's buffer is only 16-byte
 * aligned, so 16 hashes as xxhsum's block usually lies). Each block's first byte takes the last
 * hash, so the compiler cannot hoist the hash out of the loop. GB/s = 10^9 B/s.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc, char**argv){
  int wide = argc > 1 && atoi(argv[1]) == 128;
  size_t off = argc > 2 ? (size_t)atoi(argv[2]) % 4096 : 0;
  size_t n=102400; unsigned char*page=aligned_alloc(4096, n+4096); unsigned char*b=page+off;
  for(size_t i=0;i<n;i++)b[i]=(unsigned char)(i*2654435761u>>24);
  for(int r=0;r<3;r++){ unsigned long long acc=0; size_t it=0; double t0=now();
    while(now()-t0<1.0){ for(int k=0;k<1000;k++){if(wide){XXH128_hash_t h=XXH3_128bits(b,n); acc^=h.low64^h.high64;} else acc^=XXH3_64bits(b,n); b[0]^=(unsigned char)acc;} it+=1000;}
    double t=now()-t0; printf("%.2f GB/s (%llx)\n", it*(double)n/t/1e9, acc);}
  free(page);
}
