// Wiping freed heap memory, for a process that holds plaintext in ordinary buffers (the
// agent): once enabled, every block given back through free(3) or left behind by realloc(3)
// is zeroed (explicit_bzero, which the optimizer cannot drop) before the C library reuses
// it, so plaintext that passed through Swift arrays, strings and Data does not outlive
// them in freed memory. The interposers below replace the C library's free and realloc for
// the whole process (the executable's definitions come first in symbol lookup); they call
// through to the allocator's own (the next definitions: a preloaded allocator's, else glibc's)
// and cost one relaxed load while wiping is off. This file is linked into the dpctl executable only (its own target), never
// into the libraries: a library that replaced free(3) would hand glibc the blocks of any
// other allocator a program uses (jemalloc preloaded, say). CSocket's weak definitions of
// the two functions below answer "not supported" where this file is not linked. Under AddressSanitizer or ThreadSanitizer, whose runtimes define free and
// realloc themselves, nothing is interposed and enabling fails with ENOTSUP.
#define _GNU_SOURCE
#include "dp_freed_memory.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define DP_NO_INTERPOSING 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DP_NO_INTERPOSING 1
#endif

#if defined(__linux__) && defined(__GLIBC__) && !defined(DP_NO_INTERPOSING)

extern void __libc_free(void *block);
extern void *__libc_realloc(void *block, size_t size);

// The allocator's own free and realloc: the next definitions after this executable's (a
// preloaded allocator's, such as jemalloc's, else the C library's), so that every block goes
// back to the allocator that made it. Found at the first call, not in a constructor: the
// loader and the libraries free memory before any constructor of the executable runs. While
// they are being found (dlsym frees nothing when it succeeds), glibc's own stand in.
static void (*next_free)(void *) = NULL;
static void *(*next_realloc)(void *, size_t) = NULL;
static __thread int finding = 0;

static void find_allocator(void) {
    if (finding) return;
    finding = 1;
    void (*found_free)(void *) = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    void *(*found_realloc)(void *, size_t) = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    if (!found_free || !found_realloc) {
        found_free = __libc_free;
        found_realloc = __libc_realloc;
    }
    __atomic_store_n(&next_realloc, found_realloc, __ATOMIC_RELEASE);
    __atomic_store_n(&next_free, found_free, __ATOMIC_RELEASE);
    finding = 0;
}

static void (*allocator_free(void))(void *) {
    void (*found)(void *) = __atomic_load_n(&next_free, __ATOMIC_ACQUIRE);
    if (!found) {
        find_allocator();
        found = __atomic_load_n(&next_free, __ATOMIC_ACQUIRE);
    }
    return found ? found : __libc_free;
}

static void *(*allocator_realloc(void))(void *, size_t) {
    void *(*found)(void *, size_t) = __atomic_load_n(&next_realloc, __ATOMIC_ACQUIRE);
    if (!found) {
        find_allocator();
        found = __atomic_load_n(&next_realloc, __ATOMIC_ACQUIRE);
    }
    return found ? found : __libc_realloc;
}

static int dp_wiping = 0;

void free(void *block) {
    if (block && __atomic_load_n(&dp_wiping, __ATOMIC_RELAXED)) {
        explicit_bzero(block, malloc_usable_size(block));
    }
    allocator_free()(block);
}

// A grown block is a new one, the old one copied and then wiped: the allocator's realloc
// would free the old block itself, unwiped. A block that shrinks stays where it is, whole.
void *realloc(void *block, size_t size) {
    if (!block || !__atomic_load_n(&dp_wiping, __ATOMIC_RELAXED)) return allocator_realloc()(block, size);
    if (size == 0) {
        free(block);
        return NULL;
    }
    size_t old = malloc_usable_size(block);
    if (size <= old) return block;
    void *grown = malloc(size);
    if (!grown) return NULL;
    memcpy(grown, block, old);
    free(block);
    return grown;
}

int dp_process_wipe_freed_memory(void) {
    __atomic_store_n(&dp_wiping, 1, __ATOMIC_SEQ_CST);
    return 0;
}

int dp_process_wipes_freed_memory(void) {
    return __atomic_load_n(&dp_wiping, __ATOMIC_RELAXED);
}

#endif
