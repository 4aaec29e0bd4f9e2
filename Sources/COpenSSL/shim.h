// OpenSSL's libcrypto: big numbers (the Secret Service's Diffie-Hellman group), AES-128-CBC
// through EVP, HMAC-SHA-256. Only CryptoBridge imports this module.
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
