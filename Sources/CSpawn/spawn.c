#define _GNU_SOURCE
#include "herald_spawn.h"

#include <signal.h>
#include <spawn.h>

int herald_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], int in, int out, int err) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int status = posix_spawn_file_actions_init(&actions);
    if (status != 0) return status;
    status = posix_spawnattr_init(&attributes);
    if (status != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return status;
    }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if (status == 0) status = posix_spawn_file_actions_adddup2(&actions, in, 0);
    if (status == 0) status = posix_spawn_file_actions_adddup2(&actions, out, 1);
    if (status == 0) status = posix_spawn_file_actions_adddup2(&actions, err, 2);
    // In the child, after the dup2s: a list of descriptors made here would miss one opened
    // meanwhile (Foundation's Process makes such a list).
    if (status == 0) status = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (status == 0) status = posix_spawnattr_setflags(
        &attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (status == 0) status = posix_spawnattr_setsigmask(&attributes, &none);
    if (status == 0) status = posix_spawnattr_setsigdefault(&attributes, &all);
    if (status == 0) status = posix_spawn(pid, path, &actions, &attributes, argv, envp);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return status;
}
