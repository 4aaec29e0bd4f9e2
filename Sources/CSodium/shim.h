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
#if defined(__linux__)
/* glibc's sync_file_range, declared here for the same reason as memmem (its
   header declares it only under _GNU_SOURCE). `long` is off64_t on the 64-bit
   targets Swift supports on Linux. */
extern int sync_file_range(int descriptor, long offset, long count, unsigned int flags);
#endif

/* Starts the write-back of a byte range of an open file without waiting for it
   (SYNC_FILE_RANGE_WRITE = 2); 0 where the call does not exist. For
   SodiumBridge's WriteBehind. */
static inline int dp_start_write_behind(int descriptor, long long offset, long long count) {
#if defined(__linux__)
    return sync_file_range(descriptor, (long)offset, (long)count, 2u);
#else
    (void)descriptor; (void)offset; (void)count;
    return 0;
#endif
}
#endif
