#include "herald_crypto.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
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

// SHA-256 digest-and-sign; the signature is PKCS#1 v1.5 for RSA and DER for ECDSA.
static long digest_sign(const herald_key *key, const uint8_t *data, size_t length, uint8_t *out, size_t out_size,
                        char *error, size_t error_size) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    size_t signature_length = out_size;
    long result = -1;
    if (context != NULL && EVP_DigestSignInit(context, NULL, EVP_sha256(), NULL, key->pkey) == 1 &&
        EVP_DigestSign(context, out, &signature_length, data, length) == 1) {
        result = (long)signature_length;
    } else {
        set_error(error, error_size, "signing failed");
    }
    EVP_MD_CTX_free(context);
    return result;
}

long herald_sign_rs256(const herald_key *key, const uint8_t *data, size_t length, uint8_t *out, size_t out_size,
                       char *error, size_t error_size) {
    if (herald_key_kind(key) != HERALD_KEY_RSA) {
        set_error(error, error_size, "RS256 needs an RSA key");
        return -1;
    }
    if (out_size < (size_t)EVP_PKEY_get_size(key->pkey)) {
        set_error(error, error_size, "signature buffer too small");
        return -1;
    }
    return digest_sign(key, data, length, out, out_size, error, error_size);
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
    long der_length = digest_sign(key, data, length, der, sizeof der, error, error_size);
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

int herald_verify_rs256(const herald_key *key, const uint8_t *data, size_t length, const uint8_t *signature,
                        size_t signature_length, char *error, size_t error_size) {
    if (herald_key_kind(key) != HERALD_KEY_RSA) {
        set_error(error, error_size, "RS256 needs an RSA key");
        return -1;
    }
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    int result = -1;
    if (context != NULL && EVP_DigestVerifyInit(context, NULL, EVP_sha256(), NULL, key->pkey) == 1) {
        int verified = EVP_DigestVerify(context, signature, signature_length, data, length);
        result = verified == 1 ? 1 : 0;
        ERR_clear_error();
    } else {
        set_error(error, error_size, "verification failed");
    }
    EVP_MD_CTX_free(context);
    return result;
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
