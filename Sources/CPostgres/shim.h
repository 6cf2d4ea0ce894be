#ifndef HAUL_CPOSTGRES_SHIM_H
#define HAUL_CPOSTGRES_SHIM_H

// libpq, PostgreSQL's client library (Debian's libpq-dev): the store of several Haul nodes.
#include <libpq-fe.h>

// PG_DIAG_SQLSTATE is a character-constant macro; Swift does not import it.
static inline int haul_pg_diag_sqlstate(void) { return PG_DIAG_SQLSTATE; }

#endif
