#include "herald_crypto.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/rsa.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct herald_key {
    EVP_PKEY *pkey;
};

// Copies OpenSSL's most recent reason (or `fallback`) into `error`, and clears the queue.
static void set_error(char *error, size_t error_size, const char *fallback) {
    unsigned long code = ERR_get_error();
    if (error != NULL && error_size > 0) {
        if (code != 0) {
            ERR_error_string_n(code, error, error_size);
        } else {
            strncpy(error, fallback, error_size - 1);
            error[error_size - 1] = '\0';
        }
    }
    ERR_clear_error();
}

static herald_key *wrap(EVP_PKEY *pkey) {
    herald_key *key = calloc(1, sizeof(herald_key));
    if (key == NULL) {
        EVP_PKEY_free(pkey);
        return NULL;
    }
    key->pkey = pkey;
    return key;
}

herald_key *herald_key_load_private_pem(const char *pem, size_t length, char *error, size_t error_size) {
    BIO *bio = BIO_new_mem_buf(pem, (int)length);
    if (bio == NULL) {
        set_error(error, error_size, "out of memory");
        return NULL;
    }
    EVP_PKEY *pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (pkey == NULL) {
        set_error(error, error_size, "not a PEM private key");
        return NULL;
    }
    return wrap(pkey);
}

herald_key *herald_key_load_public_pem(const char *pem, size_t length, char *error, size_t error_size) {
    BIO *bio = BIO_new_mem_buf(pem, (int)length);
    if (bio == NULL) {
        set_error(error, error_size, "out of memory");
        return NULL;
    }
    EVP_PKEY *pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (pkey == NULL) {
        set_error(error, error_size, "not a PEM public key");
        return NULL;
    }
    return wrap(pkey);
}

void herald_key_free(herald_key *key) {
    if (key == NULL) return;
    EVP_PKEY_free(key->pkey);
    free(key);
}

int herald_key_kind(const herald_key *key) {
    if (EVP_PKEY_base_id(key->pkey) == EVP_PKEY_RSA) return HERALD_KEY_RSA;
    if (EVP_PKEY_base_id(key->pkey) == EVP_PKEY_EC && EVP_PKEY_get_bits(key->pkey) == 256) return HERALD_KEY_EC_P256;
    return HERALD_KEY_OTHER;
}

static long copy_bio(BIO *bio, char *out, size_t out_size, char *error, size_t error_size);

long herald_key_public_pem(const herald_key *key, char *out, size_t out_size, char *error, size_t error_size) {
    BIO *bio = BIO_new(BIO_s_mem());
    long result = -1;
    if (bio != NULL && PEM_write_bio_PUBKEY(bio, key->pkey)) {
        result = copy_bio(bio, out, out_size, error, error_size);
    } else {
        set_error(error, error_size, "cannot write the public key");
    }
    BIO_free(bio);
    return result;
}

// SHA-256 digest-and-sign; the signature is PKCS#1 v1.5 for RSA (or PSS when `pss`, with a salt
// as long as the digest and MGF1 over SHA-256, as JWS's PS256 requires) and DER for ECDSA.
static long digest_sign(const herald_key *key, int pss, const uint8_t *data, size_t length, uint8_t *out,
                        size_t out_size, char *error, size_t error_size) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    EVP_PKEY_CTX *settings = NULL;
    size_t signature_length = out_size;
    long result = -1;
    if (context != NULL && EVP_DigestSignInit(context, &settings, EVP_sha256(), NULL, key->pkey) == 1 &&
        (!pss || (EVP_PKEY_CTX_set_rsa_padding(settings, RSA_PKCS1_PSS_PADDING) == 1 &&
                  EVP_PKEY_CTX_set_rsa_pss_saltlen(settings, RSA_PSS_SALTLEN_DIGEST) == 1 &&
                  EVP_PKEY_CTX_set_rsa_mgf1_md(settings, EVP_sha256()) == 1)) &&
        EVP_DigestSign(context, out, &signature_length, data, length) == 1) {
        result = (long)signature_length;
    } else {
        set_error(error, error_size, "signing failed");
    }
    EVP_MD_CTX_free(context);
    return result;
}

static long rsa_sign(const herald_key *key, int pss, const uint8_t *data, size_t length, uint8_t *out,
                     size_t out_size, char *error, size_t error_size) {
    if (herald_key_kind(key) != HERALD_KEY_RSA) {
        set_error(error, error_size, pss ? "PS256 needs an RSA key" : "RS256 needs an RSA key");
        return -1;
    }
    if (out_size < (size_t)EVP_PKEY_get_size(key->pkey)) {
        set_error(error, error_size, "signature buffer too small");
        return -1;
    }
    return digest_sign(key, pss, data, length, out, out_size, error, error_size);
}

long herald_sign_rs256(const herald_key *key, const uint8_t *data, size_t length, uint8_t *out, size_t out_size,
                       char *error, size_t error_size) {
    return rsa_sign(key, 0, data, length, out, out_size, error, error_size);
}

long herald_sign_ps256(const herald_key *key, const uint8_t *data, size_t length, uint8_t *out, size_t out_size,
                       char *error, size_t error_size) {
    return rsa_sign(key, 1, data, length, out, out_size, error, error_size);
}

long herald_sign_es256(const herald_key *key, const uint8_t *data, size_t length, uint8_t *out, size_t out_size,
                       char *error, size_t error_size) {
    if (herald_key_kind(key) != HERALD_KEY_EC_P256) {
        set_error(error, error_size, "ES256 needs an EC P-256 key");
        return -1;
    }
    if (out_size < 64) {
        set_error(error, error_size, "signature buffer too small");
        return -1;
    }
    uint8_t der[80];
    long der_length = digest_sign(key, 0, data, length, der, sizeof der, error, error_size);
    if (der_length < 0) return -1;
    const uint8_t *cursor = der;
    ECDSA_SIG *signature = d2i_ECDSA_SIG(NULL, &cursor, der_length);
    if (signature == NULL) {
        set_error(error, error_size, "cannot decode the ECDSA signature");
        return -1;
    }
    const BIGNUM *r = NULL, *s = NULL;
    ECDSA_SIG_get0(signature, &r, &s);
    int ok = BN_bn2binpad(r, out, 32) == 32 && BN_bn2binpad(s, out + 32, 32) == 32;
    ECDSA_SIG_free(signature);
    if (!ok) {
        set_error(error, error_size, "ECDSA signature does not fit 64 bytes");
        return -1;
    }
    return 64;
}

static int rsa_verify(const herald_key *key, int pss, const uint8_t *data, size_t length, const uint8_t *signature,
                      size_t signature_length, char *error, size_t error_size) {
    if (herald_key_kind(key) != HERALD_KEY_RSA) {
        set_error(error, error_size, pss ? "PS256 needs an RSA key" : "RS256 needs an RSA key");
        return -1;
    }
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    EVP_PKEY_CTX *settings = NULL;
    int result = -1;
    if (context != NULL && EVP_DigestVerifyInit(context, &settings, EVP_sha256(), NULL, key->pkey) == 1 &&
        (!pss || (EVP_PKEY_CTX_set_rsa_padding(settings, RSA_PKCS1_PSS_PADDING) == 1 &&
                  EVP_PKEY_CTX_set_rsa_pss_saltlen(settings, RSA_PSS_SALTLEN_DIGEST) == 1 &&
                  EVP_PKEY_CTX_set_rsa_mgf1_md(settings, EVP_sha256()) == 1))) {
        int verified = EVP_DigestVerify(context, signature, signature_length, data, length);
        result = verified == 1 ? 1 : 0;
        ERR_clear_error();
    } else {
        set_error(error, error_size, "verification failed");
    }
    EVP_MD_CTX_free(context);
    return result;
}

int herald_verify_rs256(const herald_key *key, const uint8_t *data, size_t length, const uint8_t *signature,
                        size_t signature_length, char *error, size_t error_size) {
    return rsa_verify(key, 0, data, length, signature, signature_length, error, error_size);
}

int herald_verify_ps256(const herald_key *key, const uint8_t *data, size_t length, const uint8_t *signature,
                        size_t signature_length, char *error, size_t error_size) {
    return rsa_verify(key, 1, data, length, signature, signature_length, error, error_size);
}

herald_key *herald_key_generate_rsa(int bits, char *error, size_t error_size) {
    EVP_PKEY *pkey = EVP_RSA_gen((unsigned int)bits);
    if (pkey == NULL) {
        set_error(error, error_size, "RSA key generation failed");
        return NULL;
    }
    return wrap(pkey);
}

// Copies a memory BIO's contents into `out` as a C string.
static long copy_bio(BIO *bio, char *out, size_t out_size, char *error, size_t error_size) {
    char *data = NULL;
    long length = BIO_get_mem_data(bio, &data);
    if (length < 0 || (size_t)length >= out_size) {
        set_error(error, error_size, "PEM buffer too small");
        return -1;
    }
    memcpy(out, data, (size_t)length);
    out[length] = '\0';
    return length;
}

long herald_key_private_pem(const herald_key *key, char *out, size_t out_size, char *error, size_t error_size) {
    BIO *bio = BIO_new(BIO_s_mem());
    long result = -1;
    if (bio != NULL && PEM_write_bio_PrivateKey(bio, key->pkey, NULL, NULL, 0, NULL, NULL)) {
        result = copy_bio(bio, out, out_size, error, error_size);
    } else {
        set_error(error, error_size, "cannot write the private key");
    }
    BIO_free(bio);
    return result;
}

int herald_hmac_sha256(const uint8_t *key, size_t key_length, const uint8_t *data, size_t length, uint8_t *out) {
    unsigned int out_length = 0;
    if (HMAC(EVP_sha256(), key, (int)key_length, data, length, out, &out_length) == NULL || out_length != 32) {
        ERR_clear_error();
        return -1;
    }
    return 0;
}

int herald_digest(int algorithm, const uint8_t *data, size_t length, uint8_t *out) {
    const EVP_MD *md = algorithm == HERALD_DIGEST_SHA256 ? EVP_sha256() : algorithm == HERALD_DIGEST_MD5 ? EVP_md5() : NULL;
    unsigned int out_length = 0;
    if (md == NULL || EVP_Digest(data, length, out, &out_length, md, NULL) != 1) {
        ERR_clear_error();
        return -1;
    }
    return 0;
}

int herald_verify_es256(const herald_key *key, const uint8_t *data, size_t length, const uint8_t *signature,
                        size_t signature_length, char *error, size_t error_size) {
    if (herald_key_kind(key) != HERALD_KEY_EC_P256) {
        set_error(error, error_size, "ES256 needs an EC P-256 key");
        return -1;
    }
    if (signature_length != 64) return 0;
    // JWS carries r||s; OpenSSL verifies DER.
    ECDSA_SIG *parsed = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(signature, 32, NULL), *s = BN_bin2bn(signature + 32, 32, NULL);
    uint8_t *der = NULL;
    int der_length = -1;
    if (parsed != NULL && r != NULL && s != NULL && ECDSA_SIG_set0(parsed, r, s) == 1) {
        r = s = NULL;  // owned by `parsed` now
        der_length = i2d_ECDSA_SIG(parsed, &der);
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(parsed);
    if (der_length <= 0) {
        set_error(error, error_size, "cannot encode the ECDSA signature");
        return -1;
    }
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    int result = -1;
    if (context != NULL && EVP_DigestVerifyInit(context, NULL, EVP_sha256(), NULL, key->pkey) == 1) {
        result = EVP_DigestVerify(context, der, (size_t)der_length, data, length) == 1 ? 1 : 0;
        ERR_clear_error();
    } else {
        set_error(error, error_size, "verification failed");
    }
    EVP_MD_CTX_free(context);
    OPENSSL_free(der);
    return result;
}

herald_key *herald_key_generate_p256(char *error, size_t error_size) {
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    if (pkey == NULL) {
        set_error(error, error_size, "P-256 key generation failed");
        return NULL;
    }
    return wrap(pkey);
}

herald_key *herald_key_from_raw_p256(const uint8_t *public_point, size_t public_length, const uint8_t *private_scalar,
                                     size_t private_length, char *error, size_t error_size) {
    if (public_length != 65 || public_point[0] != 0x04 || (private_scalar != NULL && private_length != 32)) {
        set_error(error, error_size, "a P-256 key is a 65-byte uncompressed point and a 32-byte scalar");
        return NULL;
    }
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    BIGNUM *scalar = private_scalar != NULL ? BN_bin2bn(private_scalar, 32, NULL) : NULL;
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    EVP_PKEY *pkey = NULL;
    int ok = builder != NULL && context != NULL &&
             OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1 &&
             OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, public_point, public_length) == 1 &&
             (scalar == NULL || OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_PRIV_KEY, scalar) == 1) &&
             (params = OSSL_PARAM_BLD_to_param(builder)) != NULL && EVP_PKEY_fromdata_init(context) == 1 &&
             EVP_PKEY_fromdata(context, &pkey, scalar != NULL ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params) == 1;
    // fromdata does not check that the point is on the curve; a peer's key must be.
    if (ok) {
        EVP_PKEY_CTX *check = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
        ok = check != NULL && EVP_PKEY_public_check_quick(check) == 1;
        EVP_PKEY_CTX_free(check);
    }
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(builder);
    BN_clear_free(scalar);
    EVP_PKEY_CTX_free(context);
    if (!ok) {
        EVP_PKEY_free(pkey);
        set_error(error, error_size, "not a valid P-256 key");
        return NULL;
    }
    return wrap(pkey);
}

long herald_key_public_raw(const herald_key *key, uint8_t *out, size_t out_size, char *error, size_t error_size) {
    if (herald_key_kind(key) != HERALD_KEY_EC_P256) {
        set_error(error, error_size, "not a P-256 key");
        return -1;
    }
    size_t length = 0;
    if (EVP_PKEY_set_utf8_string_param(key->pkey, OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT, "uncompressed") != 1 ||
        EVP_PKEY_get_octet_string_param(key->pkey, OSSL_PKEY_PARAM_PUB_KEY, out, out_size, &length) != 1 ||
        length != 65) {
        set_error(error, error_size, "cannot write the public point");
        return -1;
    }
    return (long)length;
}

long herald_ecdh(const herald_key *key, const herald_key *peer, uint8_t *out, size_t out_size, char *error,
                 size_t error_size) {
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new(key->pkey, NULL);
    size_t length = out_size;
    long result = -1;
    // The peer's point was checked to be on the curve when it was loaded (which is all P-256,
    // of cofactor 1, needs); derive_set_peer's default full check would cost a second scalar
    // multiplication, doubling the ECDH.
    if (context != NULL && EVP_PKEY_derive_init(context) == 1 &&
        EVP_PKEY_derive_set_peer_ex(context, peer->pkey, 0) == 1 &&
        EVP_PKEY_derive(context, out, &length) == 1) {
        result = (long)length;
    } else {
        set_error(error, error_size, "ECDH failed");
    }
    EVP_PKEY_CTX_free(context);
    return result;
}

int herald_hkdf_sha256(const uint8_t *salt, size_t salt_length, const uint8_t *ikm, size_t ikm_length,
                       const uint8_t *info, size_t info_length, uint8_t *out, size_t out_length, char *error,
                       size_t error_size) {
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
    size_t length = out_length;
    int ok = context != NULL && EVP_PKEY_derive_init(context) == 1 &&
             EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()) == 1 &&
             EVP_PKEY_CTX_set1_hkdf_salt(context, salt, (int)salt_length) == 1 &&
             EVP_PKEY_CTX_set1_hkdf_key(context, ikm, (int)ikm_length) == 1 &&
             EVP_PKEY_CTX_add1_hkdf_info(context, info, (int)info_length) == 1 &&
             EVP_PKEY_derive(context, out, &length) == 1 && length == out_length;
    EVP_PKEY_CTX_free(context);
    if (!ok) {
        set_error(error, error_size, "HKDF failed");
        return -1;
    }
    return 0;
}

// One AES-128-GCM operation; `encrypt` 1 seals (appending the tag), 0 opens (checking it).
static long aes128gcm(int encrypt, const uint8_t *key, const uint8_t *nonce, const uint8_t *input, size_t length,
                      uint8_t *out, size_t out_size, char *error, size_t error_size) {
    size_t text_length = encrypt ? length : length - 16;
    if ((!encrypt && length < 16) || out_size < (encrypt ? length + 16 : text_length) || length > INT32_MAX) {
        set_error(error, error_size, encrypt ? "output buffer too small" : "ciphertext shorter than its tag");
        return -1;
    }
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    int written = 0, final_length = 0;
    int ok = context != NULL && EVP_CipherInit_ex(context, EVP_aes_128_gcm(), NULL, NULL, NULL, encrypt) == 1 &&
             EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1 &&
             EVP_CipherInit_ex(context, NULL, NULL, key, nonce, encrypt) == 1;
    if (ok && !encrypt) {
        ok = EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, (void *)(input + text_length)) == 1;
    }
    ok = ok && EVP_CipherUpdate(context, out, &written, input, (int)text_length) == 1 &&
         EVP_CipherFinal_ex(context, out + written, &final_length) == 1;
    if (ok && encrypt) {
        ok = EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, out + written + final_length) == 1;
    }
    EVP_CIPHER_CTX_free(context);
    if (!ok) {
        set_error(error, error_size, encrypt ? "AES-128-GCM encryption failed" : "AES-128-GCM tag does not match");
        return -1;
    }
    return (long)(written + final_length) + (encrypt ? 16 : 0);
}

long herald_aes128gcm_encrypt(const uint8_t *key, const uint8_t *nonce, const uint8_t *plaintext, size_t length,
                              uint8_t *out, size_t out_size, char *error, size_t error_size) {
    return aes128gcm(1, key, nonce, plaintext, length, out, out_size, error, error_size);
}

long herald_aes128gcm_decrypt(const uint8_t *key, const uint8_t *nonce, const uint8_t *ciphertext, size_t length,
                              uint8_t *out, size_t out_size, char *error, size_t error_size) {
    return aes128gcm(0, key, nonce, ciphertext, length, out, out_size, error, error_size);
}

// P-256 and SHA-256, made and fetched once: neither is changed after, so every thread may share
// them (SHA256() and HMAC() would fetch the algorithm by name on every call).
static EC_GROUP *p256_group;
static EVP_MD *sha256_md;
static pthread_once_t webpush_once = PTHREAD_ONCE_INIT;
static void make_webpush_algorithms(void) {
    p256_group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

// HMAC-SHA-256 (RFC 2104) with a key of at most 64 bytes and a message of at most 192, the
// sizes RFC 8291's key schedule uses, written out over one digest context that the caller
// reuses for all five. Returns 0, or -1.
static int hmac_sha256(EVP_MD_CTX *digest, const uint8_t *key, size_t key_length, const uint8_t *message,
                       size_t length, uint8_t out[32]) {
    uint8_t block[64 + 192], inner[32];
    if (key_length > 64 || length > 192) {
        return -1;
    }
    memset(block, 0, 64);
    memcpy(block, key, key_length);
    for (int i = 0; i < 64; i++) {
        block[i] ^= 0x36;
    }
    memcpy(block + 64, message, length);
    int ok = EVP_DigestInit_ex(digest, sha256_md, NULL) == 1 && EVP_DigestUpdate(digest, block, 64 + length) == 1 &&
             EVP_DigestFinal_ex(digest, inner, NULL) == 1;
    for (int i = 0; i < 64; i++) {
        block[i] ^= 0x36 ^ 0x5c;
    }
    memcpy(block + 64, inner, 32);
    ok = ok && EVP_DigestInit_ex(digest, sha256_md, NULL) == 1 && EVP_DigestUpdate(digest, block, 64 + 32) == 1 &&
         EVP_DigestFinal_ex(digest, out, NULL) == 1;
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(inner, sizeof inner);
    return ok ? 0 : -1;
}

long herald_webpush_encrypt(const uint8_t *ua_public, const uint8_t *auth, const uint8_t *record, size_t length,
                            const uint8_t *sender_scalar, const uint8_t *salt, uint8_t *out, size_t out_size,
                            char *error, size_t error_size) {
    enum { header = 16 + 4 + 1 + 65 };
    // The record size written below is 4096, which must exceed the record and its tag.
    if (length + 16 >= 4096 || out_size < header + length + 16) {
        set_error(error, error_size, "a Web Push record is at most 4079 bytes, with room for it in the output");
        return -1;
    }
    pthread_once(&webpush_once, make_webpush_algorithms);
    if (p256_group == NULL || sha256_md == NULL) {
        set_error(error, error_size, "OpenSSL has no P-256 or SHA-256");
        return -1;
    }
    BN_CTX *bn = BN_CTX_new();
    EVP_MD_CTX *digest = EVP_MD_CTX_new();
    EC_POINT *browser = EC_POINT_new(p256_group);
    EC_POINT *point = EC_POINT_new(p256_group);
    BIGNUM *scalar = BN_secure_new();
    BIGNUM *x = BN_new();
    long result = -1;
    uint8_t secret[32], prk_key[32], ikm[32], prk[32], cek[32], nonce[32];
    if (bn == NULL || digest == NULL || browser == NULL || point == NULL || scalar == NULL || x == NULL) {
        set_error(error, error_size, "out of memory");
        goto done;
    }
    // Only the uncompressed form; oct2point refuses coordinates outside the field and points off
    // the curve (checked again, explicitly, as RFC 8291 §7 requires of anyone taking a key).
    if (ua_public[0] != 0x04 || EC_POINT_oct2point(p256_group, browser, ua_public, 65, bn) != 1 ||
        EC_POINT_is_on_curve(p256_group, browser, bn) != 1) {
        set_error(error, error_size, "the browser's key is not a point on P-256");
        result = -2;
        goto done;
    }
    uint8_t *body_salt = out, *sender_public = out + 21;
    if (salt != NULL) {
        memcpy(body_salt, salt, 16);
    } else if (RAND_bytes(body_salt, 16) != 1) {
        set_error(error, error_size, "no randomness for the salt");
        goto done;
    }
    // A new key pair for every message (RFC 8291 §3.1): a scalar in [1, n-1], its point k·G.
    BN_set_flags(scalar, BN_FLG_CONSTTIME);
    const BIGNUM *order = EC_GROUP_get0_order(p256_group);
    int have_scalar = sender_scalar != NULL ? BN_bin2bn(sender_scalar, 32, scalar) != NULL
                                            : BN_priv_rand_range_ex(scalar, order, 0, bn) == 1;
    if (!have_scalar || BN_is_zero(scalar) || BN_cmp(scalar, order) >= 0 ||
        EC_POINT_mul(p256_group, point, scalar, NULL, NULL, bn) != 1 ||
        EC_POINT_point2oct(p256_group, point, POINT_CONVERSION_UNCOMPRESSED, sender_public, 65, bn) != 65) {
        set_error(error, error_size, "P-256 key generation failed");
        goto done;
    }
    // ECDH: the x coordinate of k·ua_public.
    if (EC_POINT_mul(p256_group, point, NULL, browser, scalar, bn) != 1 ||
        EC_POINT_get_affine_coordinates(p256_group, point, x, NULL, bn) != 1 || BN_bn2binpad(x, secret, 32) != 32) {
        set_error(error, error_size, "ECDH failed");
        goto done;
    }
    // RFC 8291 §3.4, each HKDF's extract and one-block expand written out as HMACs.
    uint8_t info[192];
    static const char key_label[] = "WebPush: info";
    static const char cek_label[] = "Content-Encoding: aes128gcm";
    static const char nonce_label[] = "Content-Encoding: nonce";
    memcpy(info, key_label, sizeof key_label);  // with its NUL: the 0x00 separator
    memcpy(info + sizeof key_label, ua_public, 65);
    memcpy(info + sizeof key_label + 65, sender_public, 65);
    info[sizeof key_label + 130] = 0x01;
    uint8_t cek_info[sizeof cek_label + 1], nonce_info[sizeof nonce_label + 1];
    memcpy(cek_info, cek_label, sizeof cek_label);
    cek_info[sizeof cek_label] = 0x01;
    memcpy(nonce_info, nonce_label, sizeof nonce_label);
    nonce_info[sizeof nonce_label] = 0x01;
    int keyed = hmac_sha256(digest, auth, 16, secret, 32, prk_key) == 0 &&
                hmac_sha256(digest, prk_key, 32, info, sizeof key_label + 131, ikm) == 0 &&
                hmac_sha256(digest, body_salt, 16, ikm, 32, prk) == 0 &&
                hmac_sha256(digest, prk, 32, cek_info, sizeof cek_info, cek) == 0 &&
                hmac_sha256(digest, prk, 32, nonce_info, sizeof nonce_info, nonce) == 0;
    if (keyed) {
        // The record size need only exceed the one record (RFC 8188 §2): 4096, big-endian.
        out[16] = 0, out[17] = 0, out[18] = 0x10, out[19] = 0, out[20] = 65;
        long sealed = aes128gcm(1, cek, nonce, record, length, out + header, out_size - header, error, error_size);
        result = sealed < 0 ? -1 : header + sealed;
    } else {
        set_error(error, error_size, "key derivation failed");
    }
done:
    OPENSSL_cleanse(secret, sizeof secret);
    OPENSSL_cleanse(prk_key, sizeof prk_key);
    OPENSSL_cleanse(ikm, sizeof ikm);
    OPENSSL_cleanse(prk, sizeof prk);
    OPENSSL_cleanse(cek, sizeof cek);
    OPENSSL_cleanse(nonce, sizeof nonce);
    BN_CTX_free(bn);
    EVP_MD_CTX_free(digest);
    EC_POINT_free(browser);
    EC_POINT_clear_free(point);
    BN_clear_free(scalar);
    BN_clear_free(x);  // the shared secret's x coordinate
    return result;
}

int herald_certificate_not_after(const uint8_t *data, size_t length, const char *password, int64_t *not_after,
                                 char *error, size_t error_size) {
    BIO *bio = BIO_new_mem_buf(data, (int)length);
    X509 *certificate = bio != NULL ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    if (certificate == NULL && bio != NULL) {
        // Not PEM: a PKCS#12 bundle (.p12), as Apple's Keychain exports it.
        ERR_clear_error();
        (void)BIO_reset(bio);
        PKCS12 *bundle = d2i_PKCS12_bio(bio, NULL);
        EVP_PKEY *key = NULL;
        if (bundle != NULL) PKCS12_parse(bundle, password != NULL ? password : "", &key, &certificate, NULL);
        EVP_PKEY_free(key);
        PKCS12_free(bundle);
    }
    BIO_free(bio);
    if (certificate == NULL) {
        set_error(error, error_size, "neither a PEM certificate nor a PKCS#12 bundle (or a wrong password)");
        return -1;
    }
    struct tm time = {0};
    int ok = ASN1_TIME_to_tm(X509_get0_notAfter(certificate), &time) == 1;
    X509_free(certificate);
    if (!ok) {
        set_error(error, error_size, "the certificate's notAfter cannot be read");
        return -1;
    }
    *not_after = (int64_t)timegm(&time);
    return 0;
}
