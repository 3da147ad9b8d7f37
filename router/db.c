/* db.c — see db.h. */
#include "router/db.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct router_db {
    sqlite3 *h;
    pthread_mutex_t mu;
    char path[1024];
    int version;
};

/* Migration N (1-based) brings the schema from version N-1 to N. Never edit one that shipped:
 * append a new step instead. */
static const char *const MIGRATIONS[ROUTER_DB_SCHEMA_VERSION] = {
    /* 1: the model registry */
    "CREATE TABLE models ("
    "  id TEXT PRIMARY KEY,"          /* lower-cased repo */
    "  record TEXT NOT NULL,"         /* the registration record (JSON) */
    "  created_at INTEGER NOT NULL"
    ");",
    /* 2: chat template text kept beside the record; inference API keys */
    "ALTER TABLE models ADD COLUMN chat_template TEXT;"
    "CREATE TABLE api_keys ("
    "  id TEXT PRIMARY KEY,"
    "  name TEXT NOT NULL,"
    "  key_sha256 TEXT NOT NULL UNIQUE,"
    "  prefix TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL"
    ");",
    /* 3: nodes (identity and token hash; live state stays in memory) */
    "CREATE TABLE nodes ("
    "  id TEXT PRIMARY KEY,"
    "  token_sha256 TEXT NOT NULL UNIQUE,"
    "  info TEXT NOT NULL,"
    "  registered_at INTEGER NOT NULL"
    ");",
};

const char *router_db_strerror(int st) {
    switch (st) {
    case ROUTER_DB_OK: return "ok";
    case ROUTER_DB_EEXIST: return "already exists";
    case ROUTER_DB_ENOTFOUND: return "not found";
    case ROUTER_DB_EIO: return "database error";
    case ROUTER_DB_ENEWER: return "database written by a newer router";
    case ROUTER_DB_ENOMEM: return "out of memory";
    }
    return "unknown database status";
}

static int fail(router_db *db, const char *what, char *err, size_t es) {
    snprintf(err, es, "%s: %s: %s", db->path, what, sqlite3_errmsg(db->h));
    return ROUTER_DB_EIO;
}

static int exec(router_db *db, const char *sql, char *err, size_t es) {
    char *msg = NULL;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) != SQLITE_OK) {
        snprintf(err, es, "%s: %s: %s", db->path, sql, msg ? msg : "?");
        sqlite3_free(msg);
        return ROUTER_DB_EIO;
    }
    return ROUTER_DB_OK;
}

static int read_version(router_db *db) {
    sqlite3_stmt *st;
    int v = -1;
    if (sqlite3_prepare_v2(db->h, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK) return -1;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Applies migrations (version, target] one transaction each. */
static int migrate(router_db *db, int target, char *err, size_t es) {
    for (int v = db->version; v < target; v++) {
        char setv[64];
        snprintf(setv, sizeof setv, "PRAGMA user_version = %d;", v + 1);
        if (exec(db, "BEGIN IMMEDIATE;", err, es)) return ROUTER_DB_EIO;
        if (exec(db, MIGRATIONS[v], err, es) || exec(db, setv, err, es)) {
            char ignore[64];
            exec(db, "ROLLBACK;", ignore, sizeof ignore);
            return ROUTER_DB_EIO;
        }
        if (exec(db, "COMMIT;", err, es)) return ROUTER_DB_EIO;
        db->version = v + 1;
    }
    return ROUTER_DB_OK;
}

router_db *router_db_open(const char *dir, int max_version, char *err, size_t es) {
    if (max_version <= 0 || max_version > ROUTER_DB_SCHEMA_VERSION) max_version = ROUTER_DB_SCHEMA_VERSION;
    router_db *db = calloc(1, sizeof *db);
    if (!db) { snprintf(err, es, "out of memory"); return NULL; }
    int n = snprintf(db->path, sizeof db->path, "%s/router.db", dir);
    if (n < 0 || (size_t)n >= sizeof db->path) {
        snprintf(err, es, "data dir path too long (%zu bytes, at most %zu)", strlen(dir), sizeof db->path - 11);
        free(db);
        return NULL;
    }
    pthread_mutex_init(&db->mu, NULL);
    if (sqlite3_open_v2(db->path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) !=
        SQLITE_OK) {
        snprintf(err, es, "%s: cannot open: %s", db->path, db->h ? sqlite3_errmsg(db->h) : "out of memory");
        router_db_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db->h, 5000);
    /* journal_mode answers with the mode in force: check that WAL really took. */
    sqlite3_stmt *st;
    int wal = 0;
    if (sqlite3_prepare_v2(db->h, "PRAGMA journal_mode=WAL", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) wal = !strcmp((const char *)sqlite3_column_text(st, 0), "wal");
        sqlite3_finalize(st);
    }
    if (!wal) { fail(db, "cannot switch to WAL journal mode", err, es); router_db_close(db); return NULL; }
    if (exec(db, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;", err, es)) { router_db_close(db); return NULL; }
    db->version = read_version(db);
    if (db->version < 0) { fail(db, "cannot read the schema version", err, es); router_db_close(db); return NULL; }
    if (db->version > ROUTER_DB_SCHEMA_VERSION) {
        snprintf(err, es, "%s: schema version %d is newer than this router's %d (%s)", db->path, db->version,
                 ROUTER_DB_SCHEMA_VERSION, router_db_strerror(ROUTER_DB_ENEWER));
        router_db_close(db);
        return NULL;
    }
    if (migrate(db, max_version, err, es)) { router_db_close(db); return NULL; }
    return db;
}

void router_db_close(router_db *db) {
    if (!db) return;
    sqlite3_close(db->h); /* NULL is a no-op */
    pthread_mutex_destroy(&db->mu);
    free(db);
}

int router_db_version(router_db *db) { return db->version; }

/* --- statement helpers --------------------------------------------------- */

static int prepare(router_db *db, const char *sql, sqlite3_stmt **st, char *err, size_t es) {
    if (sqlite3_prepare_v2(db->h, sql, -1, st, NULL) != SQLITE_OK) return fail(db, sql, err, es);
    return ROUTER_DB_OK;
}

static char *dup_col(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

/* Runs a one-statement write (binds are text except those given as int64 with a NULL text). */
static int write1(router_db *db, const char *sql, int n, const char *const *texts, const int64_t *ints, char *err,
                  size_t es) {
    sqlite3_stmt *st;
    pthread_mutex_lock(&db->mu);
    int rc = prepare(db, sql, &st, err, es);
    if (rc == ROUTER_DB_OK) {
        for (int i = 0; i < n; i++) {
            if (texts[i]) sqlite3_bind_text(st, i + 1, texts[i], -1, SQLITE_TRANSIENT);
            else if (ints) sqlite3_bind_int64(st, i + 1, ints[i]);
            else sqlite3_bind_null(st, i + 1);
        }
        int s = sqlite3_step(st);
        if (s == SQLITE_CONSTRAINT) rc = ROUTER_DB_EEXIST, snprintf(err, es, "%s", sqlite3_errmsg(db->h));
        else if (s != SQLITE_DONE) rc = fail(db, sql, err, es);
        else if (!strncmp(sql, "DELETE", 6) && sqlite3_changes(db->h) == 0) rc = ROUTER_DB_ENOTFOUND, snprintf(err, es, "not found");
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&db->mu);
    return rc;
}

/* Looks up one text column by one text key. */
static int find1(router_db *db, const char *sql, const char *key, char *out, size_t out_size) {
    sqlite3_stmt *st;
    char err[8192];
    pthread_mutex_lock(&db->mu);
    int rc = prepare(db, sql, &st, err, sizeof err);
    if (rc == ROUTER_DB_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW) snprintf(out, out_size, "%s", (const char *)sqlite3_column_text(st, 0));
        else rc = s == SQLITE_DONE ? ROUTER_DB_ENOTFOUND : ROUTER_DB_EIO;
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&db->mu);
    return rc;
}

/* --- models -------------------------------------------------------------- */

int router_db_model_insert(router_db *db, const char *id, const char *record, const char *tmpl, int64_t created_at,
                           char *err, size_t es) {
    /* A template may be absent: bind NULL by giving no text and no ints for that slot. */
    sqlite3_stmt *st;
    pthread_mutex_lock(&db->mu);
    int rc = prepare(db, "INSERT INTO models (id, record, chat_template, created_at) VALUES (?, ?, ?, ?)", &st, err, es);
    if (rc == ROUTER_DB_OK) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, record, -1, SQLITE_TRANSIENT);
        if (tmpl) sqlite3_bind_text(st, 3, tmpl, -1, SQLITE_TRANSIENT);
        else sqlite3_bind_null(st, 3);
        sqlite3_bind_int64(st, 4, created_at);
        int s = sqlite3_step(st);
        if (s == SQLITE_CONSTRAINT) rc = ROUTER_DB_EEXIST, snprintf(err, es, "model '%s' is already registered", id);
        else if (s != SQLITE_DONE) rc = fail(db, "INSERT INTO models", err, es);
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&db->mu);
    return rc;
}

int router_db_model_get(router_db *db, const char *id, char **record_out, char **tmpl_out, char *err, size_t es) {
    sqlite3_stmt *st;
    *record_out = NULL;
    if (tmpl_out) *tmpl_out = NULL;
    pthread_mutex_lock(&db->mu);
    int rc = prepare(db, "SELECT record, chat_template FROM models WHERE id = ?", &st, err, es);
    if (rc == ROUTER_DB_OK) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW) {
            *record_out = dup_col(st, 0);
            if (tmpl_out) *tmpl_out = dup_col(st, 1);
            if (!*record_out) rc = ROUTER_DB_ENOMEM, snprintf(err, es, "out of memory");
        } else if (s == SQLITE_DONE) {
            rc = ROUTER_DB_ENOTFOUND;
            snprintf(err, es, "model '%s' is not registered", id);
        } else {
            rc = fail(db, "SELECT FROM models", err, es);
        }
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&db->mu);
    return rc;
}

int router_db_model_each(router_db *db, void (*fn)(void *, const char *, const char *), void *user, char *err,
                         size_t es) {
    sqlite3_stmt *st;
    pthread_mutex_lock(&db->mu);
    int rc = prepare(db, "SELECT id, record FROM models ORDER BY id", &st, err, es);
    if (rc == ROUTER_DB_OK) {
        int s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW)
            fn(user, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1));
        if (s != SQLITE_DONE) rc = fail(db, "SELECT FROM models", err, es);
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&db->mu);
    return rc;
}

int router_db_model_delete(router_db *db, const char *id, char *err, size_t es) {
    const char *t[] = {id};
    int rc = write1(db, "DELETE FROM models WHERE id = ?", 1, t, NULL, err, es);
    if (rc == ROUTER_DB_ENOTFOUND) snprintf(err, es, "model '%s' is not registered", id);
    return rc;
}

/* --- API keys ------------------------------------------------------------- */

int router_db_apikey_insert(router_db *db, const char *id, const char *name, const char *hash, const char *prefix,
                            int64_t created_at, char *err, size_t es) {
    const char *t[] = {id, name, hash, prefix, NULL};
    const int64_t i[] = {0, 0, 0, 0, created_at};
    return write1(db, "INSERT INTO api_keys (id, name, key_sha256, prefix, created_at) VALUES (?, ?, ?, ?, ?)", 5, t, i,
                  err, es);
}

int router_db_apikey_find(router_db *db, const char *hash, char *id_out, size_t id_size) {
    return find1(db, "SELECT id FROM api_keys WHERE key_sha256 = ?", hash, id_out, id_size);
}

int router_db_apikey_each(router_db *db, void (*fn)(void *, const char *, const char *, const char *, int64_t),
                          void *user, char *err, size_t es) {
    sqlite3_stmt *st;
    pthread_mutex_lock(&db->mu);
    int rc = prepare(db, "SELECT id, name, prefix, created_at FROM api_keys ORDER BY created_at, id", &st, err, es);
    if (rc == ROUTER_DB_OK) {
        int s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW)
            fn(user, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1),
               (const char *)sqlite3_column_text(st, 2), sqlite3_column_int64(st, 3));
        if (s != SQLITE_DONE) rc = fail(db, "SELECT FROM api_keys", err, es);
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&db->mu);
    return rc;
}

int router_db_apikey_delete(router_db *db, const char *id, char *err, size_t es) {
    const char *t[] = {id};
    int rc = write1(db, "DELETE FROM api_keys WHERE id = ?", 1, t, NULL, err, es);
    if (rc == ROUTER_DB_ENOTFOUND) snprintf(err, es, "no API key with id '%s'", id);
    return rc;
}

/* --- nodes ------------------------------------------------------------------ */

int router_db_node_put(router_db *db, const char *id, const char *hash, const char *info, int64_t registered_at,
                       char *err, size_t es) {
    const char *t[] = {id, hash, info, NULL};
    const int64_t i[] = {0, 0, 0, registered_at};
    return write1(db, "INSERT OR REPLACE INTO nodes (id, token_sha256, info, registered_at) VALUES (?, ?, ?, ?)", 4, t,
                  i, err, es);
}

int router_db_node_find_token(router_db *db, const char *hash, char *id_out, size_t id_size) {
    return find1(db, "SELECT id FROM nodes WHERE token_sha256 = ?", hash, id_out, id_size);
}

int router_db_node_each(router_db *db, void (*fn)(void *, const char *, const char *, int64_t), void *user, char *err,
                        size_t es) {
    sqlite3_stmt *st;
    pthread_mutex_lock(&db->mu);
    int rc = prepare(db, "SELECT id, info, registered_at FROM nodes ORDER BY registered_at, id", &st, err, es);
    if (rc == ROUTER_DB_OK) {
        int s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW)
            fn(user, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1),
               sqlite3_column_int64(st, 2));
        if (s != SQLITE_DONE) rc = fail(db, "SELECT FROM nodes", err, es);
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&db->mu);
    return rc;
}
