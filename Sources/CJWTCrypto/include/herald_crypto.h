// A small C surface over OpenSSL libcrypto for JWT signatures: load a PEM key once, sign
// RS256 (RSASSA-PKCS1-v1_5 with SHA-256) or ES256 (ECDSA P-256 with SHA-256, raw r||s),
// and verify RS256 (for the FCM emulator). Errors come back as OpenSSL's reason text.
#ifndef HERALD_CRYPTO_H
#define HERALD_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

typedef struct herald_key herald_key;

enum herald_key_kind { HERALD_KEY_RSA = 1, HERALD_KEY_EC_P256 = 2, HERALD_KEY_OTHER = 3 };

// Loads a PEM private key: PKCS#8 ("PRIVATE KEY"), PKCS#1 ("RSA PRIVATE KEY") or SEC1
// ("EC PRIVATE KEY"). Returns NULL and fills `error` on failure.
herald_key *herald_key_load_private_pem(const char *pem, size_t length, char *error, size_t error_size);

// Loads a PEM public key ("PUBLIC KEY").
herald_key *herald_key_load_public_pem(const char *pem, size_t length, char *error, size_t error_size);

void herald_key_free(herald_key *key);

int herald_key_kind(const herald_key *key);

// Writes the key's public half as PEM into `out`; returns its length, or -1 if it does not fit.
long herald_key_public_pem(const herald_key *key, char *out, size_t out_size, char *error, size_t error_size);

// RS256: writes the signature (the key's modulus size, e.g. 256 bytes) into `out`.
// Returns its length, or -1 with `error` filled.
long herald_sign_rs256(const herald_key *key, const uint8_t *data, size_t length, uint8_t *out, size_t out_size,
                       char *error, size_t error_size);

// ES256: writes the 64-byte r||s signature that JWS requires (not DER) into `out`.
long herald_sign_es256(const herald_key *key, const uint8_t *data, size_t length, uint8_t *out, size_t out_size,
                       char *error, size_t error_size);

// RS256 verification: 1 valid, 0 invalid, -1 error.
int herald_verify_rs256(const herald_key *key, const uint8_t *data, size_t length, const uint8_t *signature,
                        size_t signature_length, char *error, size_t error_size);

// Generates an RSA key of `bits` bits (for test and demo service accounts).
herald_key *herald_key_generate_rsa(int bits, char *error, size_t error_size);

// Writes the private key as PKCS#8 PEM into `out`; returns its length, or -1 if it does not fit.
long herald_key_private_pem(const herald_key *key, char *out, size_t out_size, char *error, size_t error_size);

// HMAC-SHA256 of `data` with `key`, written as 32 bytes into `out`. Returns 0, or -1.
int herald_hmac_sha256(const uint8_t *key, size_t key_length, const uint8_t *data, size_t length, uint8_t *out);

#endif
