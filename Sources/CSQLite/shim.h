#ifndef DATAPROTECTION_CSQLITE_SHIM_H
#define DATAPROTECTION_CSQLITE_SHIM_H
#include <sqlite3.h>

/* A file of the DataProtection VFS as SQLite allocates it (`szOsFile` bytes):
   SQLite's base structure first, then the retained Swift object that serves the
   file. Only SQLiteBridge uses it. */
typedef struct DPSQLiteFile {
    sqlite3_file base;
    void *object;
} DPSQLiteFile;

/* SQLITE_TRANSIENT is a macro that casts -1 to a function pointer, which Swift
   cannot import; binding text and blobs with it makes SQLite copy them. */
static inline sqlite3_destructor_type dp_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}
/* A zeroing allocator for SQLite (SQLITE_CONFIG_MALLOC): every block SQLite frees,
   or leaves behind when it grows one, is wiped before it goes back to the heap, so the
   plaintext of pages, rows and statements does not outlive its use in freed memory.
   Each block carries its size in a 16-byte prefix (which keeps malloc's alignment).
   Installed by SQLiteBridge before SQLite initialises; only SQLiteBridge uses it. */
#include <stdlib.h>
#include <string.h>

#define DP_SQLITE_PREFIX 16

/* Called, when set, with every block just wiped and about to be freed (tests check it). */
static void (*dp_sqlite_free_observer)(const void *block, long long size) = 0;

static void dp_sqlite_wipe(void *block, size_t size) {
#if defined(__APPLE__)
    memset_s(block, size, 0, size);
#else
    explicit_bzero(block, size);
#endif
}

static void *dp_sqlite_malloc(int size) {
    if (size <= 0) return 0;
    char *block = (char *)malloc((size_t)size + DP_SQLITE_PREFIX);
    if (!block) return 0;
    *(sqlite3_int64 *)block = size;
    return block + DP_SQLITE_PREFIX;
}

static int dp_sqlite_size(void *pointer) {
    return pointer ? (int)*(sqlite3_int64 *)((char *)pointer - DP_SQLITE_PREFIX) : 0;
}

static void dp_sqlite_free(void *pointer) {
    if (!pointer) return;
    char *block = (char *)pointer - DP_SQLITE_PREFIX;
    size_t size = (size_t)*(sqlite3_int64 *)block;
    dp_sqlite_wipe(block, size + DP_SQLITE_PREFIX);
    if (dp_sqlite_free_observer) dp_sqlite_free_observer(block, (long long)(size + DP_SQLITE_PREFIX));
    free(block);
}

/* A new block, the old one copied and then wiped: realloc(3) could leave the old
   block's bytes in freed memory. */
static void *dp_sqlite_realloc(void *pointer, int size) {
    if (!pointer) return dp_sqlite_malloc(size);
    void *grown = dp_sqlite_malloc(size);
    if (!grown) return 0;
    int old = dp_sqlite_size(pointer);
    memcpy(grown, pointer, (size_t)(old < size ? old : size));
    dp_sqlite_free(pointer);
    return grown;
}

static int dp_sqlite_roundup(int size) { return (size + 7) & ~7; }
static int dp_sqlite_mem_init(void *unused) { (void)unused; return SQLITE_OK; }
static void dp_sqlite_mem_shutdown(void *unused) { (void)unused; }

/* Installs the zeroing allocator; SQLITE_MISUSE once SQLite is initialised (by anyone in
   the process). sqlite3_config is variadic, which Swift cannot call. Two defaults that keep
   freed plaintext out of the allocator's reach go too: the page cache's bulk block (SQLite
   allocates room for 20 pages per connection up front and returns released pages to it
   unwiped, until the connection closes) and lookaside memory (per-connection slots for small
   objects, reused unwiped): every page and small object is then its own block, wiped when
   freed. And SQLite's memory statistics (sqlite3_memory_used, sqlite3_status64, the heap
   limits), which nothing here reads: kept, they take a process-wide mutex and ask each
   block's size around every allocation and free, some 5 % of the CPU of a bulk insert once
   every small object is its own block. */
static inline int dp_sqlite_install_wiping_allocator(void) {
    static const sqlite3_mem_methods methods = {
        dp_sqlite_malloc, dp_sqlite_free, dp_sqlite_realloc, dp_sqlite_size,
        dp_sqlite_roundup, dp_sqlite_mem_init, dp_sqlite_mem_shutdown, 0
    };
    int status = sqlite3_config(SQLITE_CONFIG_MALLOC, &methods);
    if (status != SQLITE_OK) return status;
    status = sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)0, 0, 0);
    if (status != SQLITE_OK) return status;
    status = sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 0, 0);
    if (status != SQLITE_OK) return status;
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

static inline void dp_sqlite_set_free_observer(void (*observer)(const void *block, long long size)) {
    dp_sqlite_free_observer = observer;
}
/* A statement gate (SQLiteBridge's SQLiteStatementGate): a progress handler called at every
   step of every statement of one connection. Open (state 0), it costs one atomic load per
   step; closed, it interrupts every statement but a ROLLBACK (which ends a transaction and
   must stay possible: a library that rolls back after an error must not be left inside the
   transaction), so SQLite answers nothing, even from its caches, and commits nothing. */
typedef struct DPStatementGate {
    int state;   /* 0 open, else why it is closed; read and written atomically */
    sqlite3 *connection;
} DPStatementGate;

static int dp_gate_is_rollback(const char *sql) {
    static const char word[] = "ROLLBACK";
    if (!sql) return 0;
    while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r') sql++;
    for (int index = 0; word[index]; index++) {
        char c = sql[index];
        if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
        if (c != word[index]) return 0;
    }
    return 1;
}

static int dp_gate_progress(void *context) {
    DPStatementGate *gate = (DPStatementGate *)context;
    if (__atomic_load_n(&gate->state, __ATOMIC_ACQUIRE) == 0) return 0;
    /* Closed: the one statement running now (a connection runs one step at a time) may go
       on only if it is a ROLLBACK. */
    for (sqlite3_stmt *statement = sqlite3_next_stmt(gate->connection, 0); statement;
         statement = sqlite3_next_stmt(gate->connection, statement)) {
        if (sqlite3_stmt_busy(statement) && dp_gate_is_rollback(sqlite3_sql(statement))) return 0;
    }
    return 1;
}

static inline void dp_gate_install(DPStatementGate *gate) {
    sqlite3_progress_handler(gate->connection, 1, dp_gate_progress, gate);
}

static inline void dp_gate_set_state(DPStatementGate *gate, int state) {
    __atomic_store_n(&gate->state, state, __ATOMIC_RELEASE);
}

static inline int dp_gate_state(DPStatementGate *gate) {
    return __atomic_load_n(&gate->state, __ATOMIC_ACQUIRE);
}
#endif
