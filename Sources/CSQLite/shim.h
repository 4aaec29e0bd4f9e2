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
#endif
