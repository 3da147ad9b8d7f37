/* db.h — the router's SQLite registry: models, API keys, nodes.
 *
 * One database file, DATA_DIR/router.db, in WAL mode with synchronous=FULL.
 *
 * The kill -9 guarantee. A handler answers 201 only after router_db_*_insert returned, i.e. after
 * SQLite's COMMIT returned. In WAL mode a commit appends the transaction's pages plus a commit frame
 * to router.db-wal; with synchronous=FULL the WAL is fsync'd before COMMIT returns. A process killed
 * at any instant therefore leaves either the whole transaction in the WAL (replayed at the next
 * open) or no trace of it (a torn tail without its commit frame is ignored at recovery). A model row
 * is written by one INSERT in one transaction, so it is never half there. (synchronous=NORMAL would
 * survive kill -9 as well, since written WAL pages sit in the OS page cache, but could lose the
 * last commits on a power cut; registrations are rare, so the extra fsync per commit is cheap and
 * makes "answered 201 = durable" hold for power loss too.)
 *
 * Schema versions live in PRAGMA user_version; router_db_open applies each missing migration in its
 * own transaction (a crash mid-migration rolls that step back), and refuses a database written by a
 * newer router. Thread-safe: every call takes the handle's mutex. */
#ifndef ROUTER_DB_H
#define ROUTER_DB_H

#include <stddef.h>
#include <stdint.h>

typedef struct router_db router_db; /* opaque */

typedef enum router_db_status {
    ROUTER_DB_OK = 0,
    ROUTER_DB_EEXIST,    /* a row with that key is already there (nothing was changed) */
    ROUTER_DB_ENOTFOUND, /* no row with that key */
    ROUTER_DB_EIO,       /* SQLite failed (message names the statement and SQLite's error) */
    ROUTER_DB_ENEWER,    /* the database was written by a newer router (schema version too high) */
    ROUTER_DB_ENOMEM,
} router_db_status;

/* The schema version this build writes (number of migrations). */
#define ROUTER_DB_SCHEMA_VERSION 3

const char *router_db_strerror(int status);

/* Opens (creating if needed) DATA_DIR/router.db; DATA_DIR must exist. Migrates up to max_version
 * (0 = ROUTER_DB_SCHEMA_VERSION; tests pass lower values to build old databases). NULL on failure
 * with the cause (path, SQLite message, versions) in err. */
router_db *router_db_open(const char *data_dir, int max_version, char *err, size_t err_size);
/* Closes the database. Accepts NULL. */
void router_db_close(router_db *db);
/* The schema version of the open database. */
int router_db_version(router_db *db);

/* --- models: id (lower-cased repo) -> record JSON text, plus the chat template text --- */
/* Inserts atomically; EEXIST if id is already registered (the existing row stays untouched). */
int router_db_model_insert(router_db *db, const char *id, const char *record_json, const char *chat_template,
                           int64_t created_at, char *err, size_t err_size);
/* *record_out (malloc'd, caller frees) gets the record JSON; template_out (may be NULL) the template
 * text or NULL. ENOTFOUND if absent. */
int router_db_model_get(router_db *db, const char *id, char **record_out, char **template_out, char *err,
                        size_t err_size);
/* Calls fn(user, id, record_json) for each model in id order. */
int router_db_model_each(router_db *db, void (*fn)(void *user, const char *id, const char *record_json), void *user,
                         char *err, size_t err_size);
/* ENOTFOUND if absent. */
int router_db_model_delete(router_db *db, const char *id, char *err, size_t err_size);

/* --- API keys (only the sha256 of each key is stored) --- */
int router_db_apikey_insert(router_db *db, const char *id, const char *name, const char *key_sha256,
                            const char *prefix, int64_t created_at, char *err, size_t err_size);
/* Finds a key by its hash; id_out gets its id. ENOTFOUND if unknown. */
int router_db_apikey_find(router_db *db, const char *key_sha256, char *id_out, size_t id_size);
/* Calls fn for each key (id, name, prefix, created_at) in creation order. */
int router_db_apikey_each(router_db *db,
                          void (*fn)(void *user, const char *id, const char *name, const char *prefix,
                                     int64_t created_at),
                          void *user, char *err, size_t err_size);
int router_db_apikey_delete(router_db *db, const char *id, char *err, size_t err_size);

/* --- nodes: id -> token hash + registration JSON (the live state is kept in memory) --- */
/* Inserts or replaces the node's row. */
int router_db_node_put(router_db *db, const char *id, const char *token_sha256, const char *info_json,
                       int64_t registered_at, char *err, size_t err_size);
/* Finds the node whose token hashes to token_sha256; id_out gets its id. ENOTFOUND if unknown. */
int router_db_node_find_token(router_db *db, const char *token_sha256, char *id_out, size_t id_size);
/* Calls fn(user, id, info_json, registered_at) for each node. */
int router_db_node_each(router_db *db,
                        void (*fn)(void *user, const char *id, const char *info_json, int64_t registered_at),
                        void *user, char *err, size_t err_size);

#endif
