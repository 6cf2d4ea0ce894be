#ifndef HAUL_CEVENT_SHIM_H
#define HAUL_CEVENT_SHIM_H

// These two must come before any event2/ header: without them, importing CEvent and CCurl into one Swift module
// fails with conflicting fd_set definitions.
#include <sys/types.h>
#include <sys/select.h>

#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

// EV_* are plain macros that Swift imports as Int32, while event_new takes a short: these give them the right type.
static inline short haul_ev_read(void) { return EV_READ; }
static inline short haul_ev_write(void) { return EV_WRITE; }
static inline short haul_ev_persist(void) { return EV_PERSIST; }
static inline short haul_ev_timeout(void) { return EV_TIMEOUT; }
static inline short haul_ev_signal(void) { return EV_SIGNAL; }

#endif
