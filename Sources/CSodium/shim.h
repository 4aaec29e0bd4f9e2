#ifndef DATAPROTECTION_CSODIUM_SHIM_H
#define DATAPROTECTION_CSODIUM_SHIM_H
#include <stddef.h>
#include <sodium.h>

/* glibc's memmem, declared here rather than through <string.h> with
   _GNU_SOURCE: defining _GNU_SOURCE in this module changes how the system
   headers define shared types (fd_set), and a fresh build then fails to merge
   them with Dispatch's and Glibc's modules. */
extern void *memmem(const void *haystack, size_t haystack_length,
                    const void *needle, size_t needle_length);

/* The first occurrence of `needle` in `haystack`, for the test-only memory
   scanner of SodiumBridge. */
static inline const void *dp_memmem(const void *haystack, size_t haystack_length,
                                    const void *needle, size_t needle_length) {
    return memmem(haystack, haystack_length, needle, needle_length);
}
#endif
