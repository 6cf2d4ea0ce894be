#ifndef HAUL_CCRYPTO_SHIM_H
#define HAUL_CCRYPTO_SHIM_H

// OpenSSL's digests (EVP), for checksums of finished files, and HMAC for signed webhooks. No wrappers needed: the EVP calls are not variadic.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#endif
