#ifndef HERALD_SPAWN_H
#define HERALD_SPAWN_H

#include <sys/types.h>

/// Starts `path` with `argv` and `envp` in a process group of its own, its standard input,
/// output and error `in`, `out` and `err`, every signal at its default and none blocked, and no
/// other descriptor of this process: they are closed in the child itself, so one this process
/// opens on another thread while the child starts cannot leak into it. Returns 0 or an errno.
int herald_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], int in, int out, int err);

#endif
