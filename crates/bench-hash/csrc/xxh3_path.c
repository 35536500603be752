/*
 * One XXH3 code path of upstream xxHash (its single header, xxhash.h), compiled in a
 * translation unit of its own: build.rs compiles this file once per path with XXH_VECTOR set
 * (XXH_SCALAR, XXH_SSE2, XXH_AVX2 with -mavx2, XXH_AVX512 with -mavx512f, XXH_NEON) and
 * HWC_PATH naming the exported wrappers (hwc_xxh3_64_avx2, ...). XXH_INLINE_ALL keeps every
 * xxHash symbol static, so the copies do not clash; only the wrappers are exported. A wrapper
 * compiled for AVX2 or AVX-512 may only be called on a CPU that has it: the Rust side checks
 * first.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#if !defined(XXH_VERSION_NUMBER) || XXH_VERSION_NUMBER < 800
#error "xxhash.h 0.8.0 or newer is needed (XXH3 became stable there)"
#endif

#define HWC_CAT2(a, b) a##_##b
#define HWC_CAT(a, b) HWC_CAT2(a, b)

/*
 * A wrapper compiled for AVX2 or AVX-512 returns with the vector registers' upper halves clean,
 * as the x86-64 ABI expects of a function: GCC leaves them dirty here (XXH3_hashLong_128b calls
 * XXH3_mergeAccs after its ZMM work, with no vzeroupper), and the caller's SSE code then runs
 * with a false dependency on every instruction. From Rust, that read the AVX-512 XXH3-128 path
 * 9 % under XXH3-64 on the same block (tools/xxh3-reference/README.md).
 */
#if defined(__AVX__)
#define HWC_CLEAN_UPPER() _mm256_zeroupper()
#else
#define HWC_CLEAN_UPPER() ((void)0)
#endif

uint64_t HWC_CAT(hwc_xxh3_64, HWC_PATH)(const void *data, size_t len)
{
    uint64_t h = XXH3_64bits(data, len);
    HWC_CLEAN_UPPER();
    return h;
}

void HWC_CAT(hwc_xxh3_128, HWC_PATH)(const void *data, size_t len, uint64_t out[2])
{
    XXH128_hash_t h = XXH3_128bits(data, len);
    HWC_CLEAN_UPPER();
    out[0] = h.low64;
    out[1] = h.high64;
}

/* The XXH_VECTOR this unit was compiled with, as xxhash.h settled it. */
int HWC_CAT(hwc_xxh3_vector, HWC_PATH)(void)
{
    return XXH_VECTOR;
}
