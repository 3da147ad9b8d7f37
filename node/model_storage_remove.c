/* model_storage_remove.c — llmr_storage_remove (see model_storage.h): deleting a snapshot folder
 * without ever following a symbolic link. Every step works on directory file descriptors (openat,
 * fstatat, unlinkat with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW), so a link swapped in by anyone cannot
 * redirect the deletion outside --models-dir: a link is only ever unlinked itself. */
#include "node/model_storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errmsg.h"
#include "common/path_safety.h"

#define MAX_DEPTH 64 /* deeper trees are not snapshots: refused rather than recursed into */

typedef struct rm_ctx {
    dev_t dev;                   /* models_dir's file system */
    llmr_storage_removal *out;
    llmr_storage_status st;      /* the first failure */
    char *err;
    size_t es;
} rm_ctx;

static void rm_fail(rm_ctx *c, const char *path, const char *what) {
    if (c->st == LLMR_STORAGE_OK) llmr_errf_status(LLMR_STORAGE_EIO, c->err, c->es, "cannot remove %s: %s", path, what);
    c->st = LLMR_STORAGE_EIO;
}

/* Removes name (inside the folder dfd; path names it for messages), recursively for a folder. */
static void rm_at(rm_ctx *c, int dfd, const char *name, const char *path, int depth) {
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT) rm_fail(c, path, strerror(errno));
        return;
    }
    if (!S_ISDIR(sb.st_mode)) {
        if (unlinkat(dfd, name, 0) != 0) { if (errno != ENOENT) rm_fail(c, path, strerror(errno)); return; }
        c->out->files++;
        if (S_ISREG(sb.st_mode)) c->out->bytes += (uint64_t)sb.st_size;
        return;
    }
    if (sb.st_dev != c->dev) { rm_fail(c, path, "on another file system (a mount point): not removed"); return; }
    if (depth >= MAX_DEPTH) { rm_fail(c, path, "folders nested too deep"); return; }
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) { rm_fail(c, path, strerror(errno)); return; }
    /* What was opened is what is listed: checked again on the descriptor (a folder swapped for a
     * mount point between the lstat and the open). */
    if (fstat(fd, &sb) != 0 || sb.st_dev != c->dev) {
        rm_fail(c, path, "on another file system (a mount point): not removed");
        close(fd);
        return;
    }
    DIR *d = fdopendir(fd);
    if (!d) { rm_fail(c, path, strerror(errno)); close(fd); return; }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
        rm_at(c, dirfd(d), de->d_name, sub, depth + 1);
    }
    closedir(d);
    if (unlinkat(dfd, name, AT_REMOVEDIR) != 0) { if (errno != ENOENT) rm_fail(c, path, strerror(errno)); return; }
    c->out->dirs++;
}

llmr_storage_status llmr_storage_remove(const char *models_dir, const char *id, llmr_storage_removal *out, char *err,
                                        size_t es) {
    llmr_storage_removal local;
    if (!out) out = &local;
    memset(out, 0, sizeof *out);
    char why[256];
    if (!models_dir || !*models_dir || !id) return llmr_errf_status(LLMR_STORAGE_EINVAL, err, es, "remove: missing argument");
    if (!llmr_path_is_safe(id, why, sizeof why))
        return llmr_errf_status(LLMR_STORAGE_EINVAL, err, es, "remove: model id '%s' is not a safe folder name: %s", id, why);
    /* models_dir itself is the operator's choice and may be a link; nothing below it is followed. */
    int fds[LLMR_PATH_MAX_LEN / 2 + 2];
    size_t nfd = 0;
    struct stat sb;
    fds[nfd] = open(models_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fds[nfd] < 0 || fstat(fds[nfd], &sb) != 0) {
        int e = errno;
        if (fds[nfd] >= 0) close(fds[nfd]);
        return llmr_errf_status(LLMR_STORAGE_EIO, err, es, "remove: models dir %s: %s", models_dir, strerror(e));
    }
    nfd++;
    rm_ctx c = {.dev = sb.st_dev, .out = out, .st = LLMR_STORAGE_OK, .err = err, .es = es};
    char comps[LLMR_PATH_MAX_LEN + 1], path[4096];
    snprintf(comps, sizeof comps, "%s", id);
    char *names[LLMR_PATH_MAX_LEN / 2 + 2];
    size_t nn = 0;
    for (char *save = NULL, *t = strtok_r(comps, "/", &save); t; t = strtok_r(NULL, "/", &save)) names[nn++] = t;
    /* Walk down id's parents ("org" of "org/name") without following links. */
    int missing = 0;
    snprintf(path, sizeof path, "%s", models_dir);
    for (size_t i = 0; i + 1 < nn && !missing && c.st == LLMR_STORAGE_OK; i++) {
        size_t l = strlen(path);
        snprintf(path + l, sizeof path - l, "/%s", names[i]);
        int fd = openat(fds[nfd - 1], names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) { fds[nfd++] = fd; continue; }
        if (errno == ENOENT) missing = 1;
        else if (errno == ELOOP || errno == ENOTDIR) rm_fail(&c, path, "a symbolic link or not a folder: not followed, nothing removed");
        else rm_fail(&c, path, strerror(errno));
    }
    if (!missing && c.st == LLMR_STORAGE_OK) {
        snprintf(path, sizeof path, "%s/%s", models_dir, id);
        rm_at(&c, fds[nfd - 1], names[nn - 1], path, 0);
        /* Parents id leaves empty go too (rmdir only: a folder still holding anything stays). */
        for (size_t i = nfd - 1; c.st == LLMR_STORAGE_OK && i >= 1; i--)
            if (unlinkat(fds[i - 1], names[i - 1], AT_REMOVEDIR) == 0) out->dirs++;
            else break;
    }
    for (size_t i = 0; i < nfd; i++) close(fds[i]);
    return c.st;
}
