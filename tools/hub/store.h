/* store.h — llmr-hub's view of its --root: repositories, their files, commit shas and hashes.
 *
 * Layout: ROOT/{org}/{name}/... is repository "org/name"; every regular file below it (symlinks are
 * followed, so a huggingface_hub cache snapshot folder can be served as is) is a file of the
 * repository, except ROOT/{org}/{name}/.commit and anything under a .git folder.
 *
 * Revision: one per repository, reachable as "main" or by its commit sha: the 40 hex digits in
 * .commit if that file exists, else sha1 over the sorted "path\0size\0mtime_ns\n" lines of all
 * files, so the sha changes whenever a file is added, removed, resized or touched.
 *
 * LFS rule (as on huggingface.co): files of 10 MiB (10485760 bytes) and more, and every
 * *.safetensors, *.bin, *.gguf, are LFS files: their tree entry carries lfs.oid = sha256 and their
 * git oid is the blob sha1 of the LFS pointer text; other files' oid is their own git blob sha1.
 *
 * Hashes (sha256, plus the git blob sha1 for non-LFS files, in one pass) are cached in memory and in a sidecar
 * folder (one small file per served file, named by the sha256 of its absolute path, keyed by
 * size + mtime_ns + inode): a file that changes is hashed again. Hashing runs on the caller's
 * thread; llmr-hub prehashes at startup so the first request of a big file does not stall. */
#ifndef LLMR_HUB_STORE_H
#define LLMR_HUB_STORE_H

#include <stddef.h>
#include <stdint.h>

#define HUB_LFS_THRESHOLD (10ull * 1024 * 1024)

typedef struct hub_store hub_store;

typedef struct hub_entry {
    char *path;           /* relative to the repo root, '/'-separated */
    int is_dir;
    uint64_t size;
    int64_t mtime_ns;
    int is_lfs;
    char sha256[65];      /* files only ("" until hashed) */
    char oid[41];         /* git oid: blob sha1 (LFS: of the pointer); directories: a derived id */
    uint64_t pointer_size;/* LFS pointer length */
} hub_entry;

typedef struct hub_repo {
    char id[256];         /* "org/name" */
    char commit[41];
    int64_t last_modified_ns; /* newest mtime among files */
    hub_entry *entries;   /* files and directories, sorted by path */
    size_t n;
} hub_repo;

/* cache_dir: sidecar for hashes (created if missing); NULL = no disk cache. */
hub_store *hub_store_create(const char *root, const char *cache_dir, char *err, size_t err_size);
void hub_store_destroy(hub_store *s);
const char *hub_store_root(const hub_store *s);

/* Scans repo "org/name" (already validated by the caller). with_hashes: fill sha256/oid of every
 * file (from the cache, or by hashing). Returns 0; -1 if the repo does not exist (err says so);
 * -2 on an I/O error (err names the file). */
int hub_store_scan(hub_store *s, const char *repo, int with_hashes, hub_repo *out, char *err, size_t err_size);
void hub_repo_free(hub_repo *r);

/* Finds a file entry (not a directory) by path, or NULL. */
const hub_entry *hub_repo_find(const hub_repo *r, const char *path);

/* Fills e->sha256/oid/pointer_size from the cache or by hashing the file. 0, or -1 with err. */
int hub_store_hash(hub_store *s, const char *repo, hub_entry *e, char *err, size_t err_size);

/* Lists "org/name" of every repository under the root (malloc'd array of malloc'd strings). */
int hub_store_list_repos(hub_store *s, char ***ids_out, size_t *n_out);

/* The absolute path of a repo file into buf. 0, -1 if too long. */
int hub_store_file_path(const hub_store *s, const char *repo, const char *path, char *buf, size_t size);

/* 1 if name is an LFS file by the rule above. */
int hub_is_lfs(const char *path, uint64_t size);

#endif
