#ifndef HAUL_CSQLITE_SHIM_H
#define HAUL_CSQLITE_SHIM_H

#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro casting -1 to a function pointer; Swift does not import it.
static inline sqlite3_destructor_type _Nonnull haul_sqlite_transient(void) { return SQLITE_TRANSIENT; }

#endif
