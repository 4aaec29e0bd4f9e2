#ifndef DP_FREED_MEMORY_H
#define DP_FREED_MEMORY_H

// The strong definitions of CSocket's dp_process_wipe_freed_memory and
// dp_process_wipes_freed_memory (declared in dp_socket.h), with free(3) and realloc(3)
// interposed: linked into the dpctl executable only.
int dp_process_wipe_freed_memory(void);
int dp_process_wipes_freed_memory(void);

#endif
