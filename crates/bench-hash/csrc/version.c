/* The xxhash.h version the paths were compiled from (XXH_VERSION_NUMBER: 801 is 0.8.1). */
#define XXH_INLINE_ALL
#include <xxhash.h>

unsigned hwc_xxh_version_number(void)
{
    return XXH_VERSION_NUMBER;
}
