// Wiping freed heap memory is the dpctl executable's (Sources/CFreedMemoryWiping, which
// replaces free(3) and realloc(3) and defines these two functions for real). Linked
// without it, as every library user is, these weak definitions say it is not supported.
#include "dp_socket.h"

#include <errno.h>

__attribute__((weak)) int dp_process_wipe_freed_memory(void) { return -ENOTSUP; }

__attribute__((weak)) int dp_process_wipes_freed_memory(void) { return 0; }
