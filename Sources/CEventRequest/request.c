#include <sys/types.h>
#include <sys/select.h>
#include <event2/http.h>
#include <event2/http_struct.h>

#include "haul_evhttp_request.h"

int haul_evhttp_request_version(const struct evhttp_request *request) {
    return request->major * 10 + request->minor;
}
