// TLS contexts: the engine's, and one per client certificate (PEM or PKCS#12), and TLS
// errors in words.
#include "h2_internal.h"

void h2_tls_failure(char *into, size_t size, const char *what, SSL *ssl) {
    long verified = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
    unsigned long code = ERR_peek_error();
    if (verified != X509_V_OK) {
        snprintf(into, size, "%s: the server's certificate is not trusted: %s", what,
                 X509_verify_cert_error_string(verified));
    } else if (code) {
        char reason[200];
        ERR_error_string_n(code, reason, sizeof reason);
        snprintf(into, size, "%s: %s", what, reason);
    } else {
        snprintf(into, size, "%s: %s", what, errno ? strerror(errno) : "the connection ended");
    }
    ERR_clear_error();
}

SSL_CTX *h2_tls_context(const char *ca_file, char *error, size_t error_size) {
    SSL_CTX *tls = SSL_CTX_new(TLS_client_method());
    if (!tls) {
        h2_tls_failure(error, error_size, "could not create a TLS context", NULL);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(tls, TLS1_2_VERSION);
    SSL_CTX_set_verify(tls, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(tls, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(tls, SSL_OP_NO_RENEGOTIATION);  // HTTP/2 forbids it (RFC 9113 §9.2.1)
    // HTTP/1.1 is offered too, or a server without HTTP/2 ends the handshake with an alert,
    // where its choice of HTTP/1.1 lets the request be handed to libcurl.
    SSL_CTX_set_alpn_protos(tls, (const unsigned char *)"\x02h2\x08http/1.1", 12);
    int loaded = ca_file ? SSL_CTX_load_verify_locations(tls, ca_file, NULL) : SSL_CTX_set_default_verify_paths(tls);
    if (loaded != 1) {
        char what[300];
        snprintf(what, sizeof what, "could not read the CA certificates in %s", ca_file ? ca_file : "the system's store");
        h2_tls_failure(error, error_size, what, NULL);
        SSL_CTX_free(tls);
        return NULL;
    }
    return tls;
}

SSL_CTX *h2_client_tls_context(const char *ca_file, const char *file, int is_p12, const char *password,
                               char *error, size_t error_size) {
    SSL_CTX *tls = h2_tls_context(ca_file, error, error_size);
    if (!tls) return NULL;
    int ok = 0;
    if (is_p12) {
        FILE *stream = fopen(file, "rb");
        PKCS12 *bundle = stream ? d2i_PKCS12_fp(stream, NULL) : NULL;
        if (stream) fclose(stream);
        EVP_PKEY *key = NULL;
        X509 *certificate = NULL;
        STACK_OF(X509) *chain = NULL;
        ok = bundle && PKCS12_parse(bundle, password ? password : "", &key, &certificate, &chain) == 1 &&
             SSL_CTX_use_cert_and_key(tls, certificate, key, chain, 1) == 1;
        EVP_PKEY_free(key);
        X509_free(certificate);
        sk_X509_pop_free(chain, X509_free);
        PKCS12_free(bundle);
    } else {
        // OpenSSL's default password callback answers with this.
        SSL_CTX_set_default_passwd_cb_userdata(tls, (void *)(password ? password : ""));
        ok = SSL_CTX_use_certificate_chain_file(tls, file) == 1 &&
             SSL_CTX_use_PrivateKey_file(tls, file, SSL_FILETYPE_PEM) == 1 && SSL_CTX_check_private_key(tls) == 1;
        SSL_CTX_set_default_passwd_cb_userdata(tls, NULL);
    }
    if (!ok) {
        char what[300];
        snprintf(what, sizeof what, "could not use the client certificate %s", file);
        h2_tls_failure(error, error_size, what, NULL);
        SSL_CTX_free(tls);
        return NULL;
    }
    return tls;
}
