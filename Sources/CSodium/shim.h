#ifndef DATAPROTECTION_CSODIUM_SHIM_H
#define DATAPROTECTION_CSODIUM_SHIM_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1  /* memmem */
#endif
#include <string.h>
#include <sodium.h>

/* The first occurrence of `needle` in `haystack` (glibc's memmem), for the
   test-only memory scanner of SodiumBridge. */
static inline const void *dp_memmem(const void *haystack, size_t haystack_length,
                                    const void *needle, size_t needle_length) {
    return memmem(haystack, haystack_length, needle, needle_length);
}
#endif
