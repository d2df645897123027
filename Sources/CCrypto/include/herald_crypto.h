// A small C surface over OpenSSL libcrypto: load a PEM key once, sign RS256 (RSASSA-PKCS1-v1_5
// with SHA-256) or ES256 (ECDSA P-256 with SHA-256, raw r||s) and verify both (for the
// emulators); and the pieces of Web Push encryption (RFC 8291): P-256 keys as raw points,
// ECDH, HKDF-SHA-256 and AES-128-GCM. Errors come back as OpenSSL's reason text.
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

// PS256 (RSASSA-PSS with SHA-256, MGF1 over SHA-256, a 32-byte salt), as RS256.
long herald_sign_ps256(const herald_key *key, const uint8_t *data, size_t length, uint8_t *out, size_t out_size,
                       char *error, size_t error_size);

// ES256: writes the 64-byte r||s signature that JWS requires (not DER) into `out`.
long herald_sign_es256(const herald_key *key, const uint8_t *data, size_t length, uint8_t *out, size_t out_size,
                       char *error, size_t error_size);

// RS256 verification: 1 valid, 0 invalid, -1 error.
int herald_verify_rs256(const herald_key *key, const uint8_t *data, size_t length, const uint8_t *signature,
                        size_t signature_length, char *error, size_t error_size);

// PS256 verification: 1 valid, 0 invalid, -1 error.
int herald_verify_ps256(const herald_key *key, const uint8_t *data, size_t length, const uint8_t *signature,
                        size_t signature_length, char *error, size_t error_size);

// Generates an RSA key of `bits` bits (for test and demo service accounts).
herald_key *herald_key_generate_rsa(int bits, char *error, size_t error_size);

// Writes the private key as PKCS#8 PEM into `out`; returns its length, or -1 if it does not fit.
long herald_key_private_pem(const herald_key *key, char *out, size_t out_size, char *error, size_t error_size);

// HMAC-SHA256 of `data` with `key`, written as 32 bytes into `out`. Returns 0, or -1.
int herald_hmac_sha256(const uint8_t *key, size_t key_length, const uint8_t *data, size_t length, uint8_t *out);

// A digest of `data`, written into `out` (32 bytes for SHA-256, 16 for MD5). Returns 0, or -1.
// MD5 is only for providers whose signatures are made with it (vivo's); it proves nothing.
enum { HERALD_DIGEST_SHA256 = 1, HERALD_DIGEST_MD5 = 2 };
int herald_digest(int algorithm, const uint8_t *data, size_t length, uint8_t *out);

// ES256 verification of a 64-byte r||s signature: 1 valid, 0 invalid, -1 error.
int herald_verify_es256(const herald_key *key, const uint8_t *data, size_t length, const uint8_t *signature,
                        size_t signature_length, char *error, size_t error_size);

// Generates a P-256 key (VAPID keys, Web Push's per-message keys, test APNs keys).
herald_key *herald_key_generate_p256(char *error, size_t error_size);

// A P-256 key from raw bytes: the 65-byte uncompressed public point, and optionally the 32-byte
// private scalar (NULL for a public key alone).
herald_key *herald_key_from_raw_p256(const uint8_t *public_point, size_t public_length, const uint8_t *private_scalar,
                                     size_t private_length, char *error, size_t error_size);

// Writes a P-256 key's public half as the 65-byte uncompressed point (0x04 || x || y).
long herald_key_public_raw(const herald_key *key, uint8_t *out, size_t out_size, char *error, size_t error_size);

// ECDH: the 32-byte shared secret of `key` (with its private half) and `peer` (a public key loaded
// by herald_key_from_raw_p256 or from PEM, so already known to be on the curve).
long herald_ecdh(const herald_key *key, const herald_key *peer, uint8_t *out, size_t out_size, char *error,
                 size_t error_size);

// HKDF-SHA-256 (RFC 5869), extract and expand: writes `out_length` bytes (at most 255 * 32).
int herald_hkdf_sha256(const uint8_t *salt, size_t salt_length, const uint8_t *ikm, size_t ikm_length,
                       const uint8_t *info, size_t info_length, uint8_t *out, size_t out_length, char *error,
                       size_t error_size);

// AES-128-GCM with a 16-byte key and a 12-byte nonce, no associated data. Encryption writes the
// ciphertext followed by the 16-byte tag (`length + 16` bytes); decryption takes that and writes
// the plaintext (`length - 16` bytes), or returns -1 when the tag does not match.
long herald_aes128gcm_encrypt(const uint8_t *key, const uint8_t *nonce, const uint8_t *plaintext, size_t length,
                              uint8_t *out, size_t out_size, char *error, size_t error_size);
long herald_aes128gcm_decrypt(const uint8_t *key, const uint8_t *nonce, const uint8_t *ciphertext, size_t length,
                              uint8_t *out, size_t out_size, char *error, size_t error_size);

// Web Push's encryption of one message (RFC 8291 §3.4, in RFC 8188's aes128gcm coding), the
// sender's side whole: a fresh P-256 key pair and salt, ECDH with the browser's `ua_public` (the
// 65-byte uncompressed point, checked to be on the curve), the key schedule, and one record.
// `record` is the plaintext with its 0x02 delimiter. Writes the body (salt, record size, the
// sender's public key, ciphertext and tag: 86 + length + 16 bytes) to `out` and returns its
// length; -2 when `ua_public` is not a point on P-256, -1 on another failure. `sender_scalar`
// (32 bytes) and `salt` (16) are NULL but in tests, which reproduce the RFC's example.
long herald_webpush_encrypt(const uint8_t *ua_public, const uint8_t *auth, const uint8_t *record, size_t length,
                            const uint8_t *sender_scalar, const uint8_t *salt, uint8_t *out, size_t out_size,
                            char *error, size_t error_size);

// The expiry (notAfter, Unix seconds) of the first certificate in a PEM file's bytes, or of a
// PKCS#12 bundle's certificate (`password` may be NULL). Returns 0, or -1 with `error` filled.
int herald_certificate_not_after(const uint8_t *data, size_t length, const char *password, int64_t *not_after,
                                 char *error, size_t error_size);

#endif
