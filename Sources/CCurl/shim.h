#ifndef HAUL_CCURL_SHIM_H
#define HAUL_CCURL_SHIM_H

#include <curl/curl.h>

// curl_easy_setopt, curl_easy_getinfo and curl_multi_setopt are variadic, which Swift cannot call: one typed
// wrapper per argument shape.

static inline CURLcode haul_easy_setopt_long(CURL *_Nonnull h, CURLoption o, long v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode haul_easy_setopt_string(CURL *_Nonnull h, CURLoption o, const char *_Nullable v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode haul_easy_setopt_ptr(CURL *_Nonnull h, CURLoption o, void *_Nullable v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode haul_easy_setopt_slist(CURL *_Nonnull h, CURLoption o, struct curl_slist *_Nullable v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode haul_easy_setopt_writefn(CURL *_Nonnull h, CURLoption o, curl_write_callback _Nullable f) {
    return curl_easy_setopt(h, o, f);
}
static inline CURLcode haul_easy_setopt_opensocketfn(CURL *_Nonnull h, curl_opensocket_callback _Nonnull f) {
    return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, f);
}
static inline CURLcode haul_easy_getinfo_long(CURL *_Nonnull h, CURLINFO i, long *_Nonnull v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode haul_easy_getinfo_off_t(CURL *_Nonnull h, CURLINFO i, curl_off_t *_Nonnull v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode haul_easy_getinfo_string(CURL *_Nonnull h, CURLINFO i, char *_Nullable *_Nonnull v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode haul_easy_getinfo_ptr(CURL *_Nonnull h, CURLINFO i, void *_Nullable *_Nonnull v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLMcode haul_multi_setopt_long(CURLM *_Nonnull m, CURLMoption o, long v) {
    return curl_multi_setopt(m, o, v);
}
static inline CURLMcode haul_multi_setopt_ptr(CURLM *_Nonnull m, CURLMoption o, void *_Nullable v) {
    return curl_multi_setopt(m, o, v);
}
static inline CURLMcode haul_multi_setopt_socketfn(CURLM *_Nonnull m, curl_socket_callback _Nonnull f) {
    return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, f);
}
static inline CURLMcode haul_multi_setopt_timerfn(CURLM *_Nonnull m, curl_multi_timer_callback _Nonnull f) {
    return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, f);
}

static inline CURLSHcode haul_share_setopt_long(CURLSH *_Nonnull s, CURLSHoption o, long v) {
    return curl_share_setopt(s, o, v);
}

// curl_easy_setopt is variadic: the SSH host key callback (CURLOPT_SSH_KEYFUNCTION).
static inline CURLcode haul_easy_setopt_sshkeyfn(CURL *_Nonnull h, curl_sshkeycallback _Nonnull f) {
    return curl_easy_setopt(h, CURLOPT_SSH_KEYFUNCTION, f);
}

// CURLMsg's payload is an anonymous union; this reads the transfer's result without relying on how Swift names it.
static inline CURLcode haul_msg_result(CURLMsg *_Nonnull msg) { return msg->data.result; }

// curl_multi_socket_all runs every transfer's state machine, not only those whose sockets are ready: an FTPS data
// connection's TLS handshake waits for the server, which waits for RETR on the control connection, which curl does
// not ask to have watched meanwhile. Marked deprecated, it is still the multi_socket API's way to do that; called
// through here so the build stays free of the warning.
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
static inline CURLMcode haul_multi_socket_all(CURLM *_Nonnull m, int *_Nonnull running) {
    return curl_multi_socket_all(m, running);
}
#pragma clang diagnostic pop

#endif
