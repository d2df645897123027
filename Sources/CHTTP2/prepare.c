// What a connection needs before it can connect (its host's addresses, its origin's client
// certificate), made on threads of their own, and the mailbox they come back through.
#include "h2_internal.h"

void h2_resolution_free(resolution *job) {
    if (job->addresses) freeaddrinfo(job->addresses);
    if (job->tls) SSL_CTX_free(job->tls);
    if (job->password) OPENSSL_cleanse(job->password, strlen(job->password));
    free(job->password);
    free(job->certificate);
    free(job->ca_file);
    free(job->host);
    free(job);
}

/// Lets go of the mailbox; the last to let go frees it. Called with its lock held.
void h2_mailbox_release_locked(mailbox *box) {
    int last = --box->references == 0;
    pthread_mutex_unlock(&box->lock);
    if (last) {
        close(box->wake);
        pthread_mutex_destroy(&box->lock);
        free(box);
    }
}

void *h2_prepare(void *argument) {
    resolution *job = argument;
    struct stat file = {0};
    // Read when there is no context yet, or the file changed; a file that cannot be looked at
    // leaves the context it gave (it may be back), or fails with why it cannot be read.
    if (job->certificate &&
        (!job->has_context || (stat(job->certificate, &file) == 0 &&
                               (file.st_mtim.tv_sec != job->known_modified.tv_sec ||
                                file.st_mtim.tv_nsec != job->known_modified.tv_nsec)))) {
        if (!job->has_context) stat(job->certificate, &file);
        job->tls = h2_client_tls_context(job->ca_file, job->certificate, job->certificate_is_p12, job->password,
                                         job->tls_error, sizeof job->tls_error);
        job->modified = file.st_mtim;
    }
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = job->numeric ? AI_NUMERICHOST : AI_ADDRCONFIG};
    job->error = getaddrinfo(job->host, job->service, &hints, &job->addresses);
    mailbox *box = job->mailbox;
    pthread_mutex_lock(&box->lock);
    // Back to the loop while it runs: to its connection, or, if that went away, to let its
    // origin read the certificate again.
    if (box->open && (job->connection || job->reading_for)) {
        job->next = box->done;
        box->done = job;
        uint64_t one = 1;
        (void)!write(box->wake, &one, sizeof one);
    } else {
        h2_resolution_free(job);
    }
    h2_mailbox_release_locked(box);
    return NULL;
}

void h2_drain_mailbox(herald_h2_engine *engine) {
    uint64_t count;
    (void)!read(engine->mailbox->wake, &count, sizeof count);
    pthread_mutex_lock(&engine->mailbox->lock);
    resolution *done = engine->mailbox->done;
    engine->mailbox->done = NULL;
    pthread_mutex_unlock(&engine->mailbox->lock);
    while (done) {
        resolution *next = done->next;
        if (done->connection) {
            engine->up.prepared(done);
        } else {
            if (done->reading_for) done->reading_for->reading = 0;
            h2_resolution_free(done);
        }
        done = next;
    }
}
