#ifndef HAUL_CSYSTEM_SHIM_H
#define HAUL_CSYSTEM_SHIM_H

#include <sys/types.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/ioctl.h>

// fallocate(2) is declared only under _GNU_SOURCE, which Swift's Glibc module is not built with.
extern int fallocate(int fd, int mode, off_t offset, off_t len);

// Reserves the blocks of [offset, offset + len) without changing the file's size (FALLOC_FL_KEEP_SIZE), so
// ENOSPC shows up before the transfer and the size still tells how far a sequential writer got.
// Returns 0 or an errno value.
static inline int haul_reserve_space(int fd, off_t offset, off_t len) {
    return fallocate(fd, 0x01 /* FALLOC_FL_KEEP_SIZE */, offset, len) == 0 ? 0 : errno;
}

// Frees the blocks of [offset, offset + len), holes read back as zeros, without changing the file's size
// (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE): a failed download keeps what it received and gives back what was
// reserved for the rest. Returns 0 or an errno value.
static inline int haul_release_space(int fd, off_t offset, off_t len) {
    return fallocate(fd, 0x02 | 0x01, offset, len) == 0 ? 0 : errno;
}

// renameat2(2) is declared only under _GNU_SOURCE. RENAME_NOREPLACE (1) fails with EEXIST instead of replacing.
extern int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);

static inline int haul_rename_noreplace(int from_dir, const char *_Nonnull from, int to_dir, const char *_Nonnull to) {
    return renameat2(from_dir, from, to_dir, to, 1);
}

// pthread_setname_np(3) is declared only under _GNU_SOURCE: names the worker threads for top, gdb and perf.
extern int pthread_setname_np(pthread_t thread, const char *_Nonnull name);

// ioctl(2) is variadic, which Swift cannot call: the width of the terminal on `fd` in columns, 0 when it is none.
static inline int haul_terminal_columns(int fd) {
    struct winsize size;
    return ioctl(fd, TIOCGWINSZ, &size) == 0 ? size.ws_col : 0;
}

// The same for its height in rows.
static inline int haul_terminal_rows(int fd) {
    struct winsize size;
    return ioctl(fd, TIOCGWINSZ, &size) == 0 ? size.ws_row : 0;
}

// posix_spawn_file_actions_addclosefrom_np(3) (glibc 2.34) is declared only under _GNU_SOURCE: a hook's process
// gets its three standard descriptors and none of the server's sockets or files.
#include <spawn.h>
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *_Nonnull actions, int from);
// pipe2(2), also _GNU_SOURCE only: the hook's pipes are close-on-exec in the server from the start.
extern int pipe2(int pipefd[_Nonnull 2], int flags);

#endif
