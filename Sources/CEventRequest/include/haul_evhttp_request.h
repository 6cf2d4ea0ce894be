#ifndef HAUL_EVHTTP_REQUEST_H
#define HAUL_EVHTTP_REQUEST_H

struct evhttp_request;

// The HTTP version of a request as major * 10 + minor (11 for HTTP/1.1). evhttp 2.1 has no getter for it, and its
// fields are visible only through http_struct.h, which would make the struct complete (no longer opaque) for every
// Swift caller: the one read sits in a C file of its own.
int haul_evhttp_request_version(const struct evhttp_request *_Nonnull request);

#endif
