#ifndef HAUL_CCRYPTO_SHIM_H
#define HAUL_CCRYPTO_SHIM_H

// OpenSSL's digests (EVP), for checksums of finished files. No wrappers needed: the EVP calls are not variadic.
#include <openssl/evp.h>

#endif
