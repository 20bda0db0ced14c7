/* RESULT bodies, read through the bounded cursor of cql_wire. */
#include "cql_result.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t err_size, const char *what) {
    snprintf(err, err_size, "malformed RESULT: %s", what);
    return -1;
}

/* One type [option], nested ones skipped after the top level (depth bounded). */
static int read_option(bw_cql_cursor *c, int depth, bw_cql_colspec *spec) {
    uint16_t id;
    if (depth > BW_CQL_MAX_TYPE_DEPTH || bw_cql_get_short(c, &id) < 0)
        return -1;
    if (spec != NULL) {
        spec->type.id = id;
        spec->custom = NULL;
    }
    const char *s;
    size_t n;
    uint16_t count;
    switch (id) {
    case BW_CQL_T_CUSTOM:
        if (bw_cql_get_string(c, &s, &n) < 0)
            return -1;
        if (spec != NULL) {
            char ignored[8];
            spec->custom = s;
            spec->custom_len = n;
            bw_cql_type t;
            if (bw_cql_type_parse(s, n, &t, ignored, sizeof ignored) == 0 &&
                t.id == BW_CQL_T_VECTOR)
                spec->type = t;
        }
        return 0;
    case BW_CQL_T_LIST:
    case BW_CQL_T_SET:
        return read_option(c, depth + 1, NULL);
    case BW_CQL_T_MAP:
        return read_option(c, depth + 1, NULL) < 0 || read_option(c, depth + 1, NULL) < 0 ? -1
                                                                                         : 0;
    case BW_CQL_T_UDT:
        if (bw_cql_get_string(c, &s, &n) < 0 || bw_cql_get_string(c, &s, &n) < 0 ||
            bw_cql_get_short(c, &count) < 0)
            return -1;
        for (uint16_t i = 0; i < count; i++)
            if (bw_cql_get_string(c, &s, &n) < 0 || read_option(c, depth + 1, NULL) < 0)
                return -1;
        return 0;
    case BW_CQL_T_TUPLE:
        if (bw_cql_get_short(c, &count) < 0)
            return -1;
        for (uint16_t i = 0; i < count; i++)
            if (read_option(c, depth + 1, NULL) < 0)
                return -1;
        return 0;
    default:
        return id <= BW_CQL_T_DURATION ? 0 : -1;
    }
}

static void metadata_free(bw_cql_metadata *m) {
    free(m->columns);
    free(m->pk_indexes);
    m->columns = NULL;
    m->pk_indexes = NULL;
}

/* Metadata of Rows (prepared == 0) or of a Prepared's bind markers (prepared == 1). */
static int read_metadata(bw_cql_cursor *c, bw_cql_metadata *m, int prepared, char *err,
                         size_t err_size) {
    memset(m, 0, sizeof *m);
    if (bw_cql_get_int(c, &m->flags) < 0 || bw_cql_get_int(c, &m->columns_count) < 0)
        return fail(err, err_size, "metadata cut short");
    if (m->columns_count < 0)
        return fail(err, err_size, "a negative column count");
    if (prepared) {
        if (bw_cql_get_int(c, &m->pk_count) < 0 || m->pk_count < 0)
            return fail(err, err_size, "a missing or negative partition key count");
        /* each index is a [short]: the count cannot claim more than the body holds */
        if ((size_t)m->pk_count > c->left / 2)
            return fail(err, err_size, "more partition key indexes than the body holds");
        m->pk_indexes = malloc(sizeof *m->pk_indexes * ((size_t)m->pk_count + 1));
        if (m->pk_indexes == NULL)
            return fail(err, err_size, "out of memory");
        for (int32_t i = 0; i < m->pk_count; i++) {
            bw_cql_get_short(c, &m->pk_indexes[i]);
            if (m->pk_indexes[i] >= (uint32_t)m->columns_count) {
                metadata_free(m);
                return fail(err, err_size, "a partition key index past the columns");
            }
        }
    } else if (m->flags & BW_CQL_META_HAS_MORE_PAGES) {
        int32_t len;
        if (bw_cql_get_bytes(c, &m->paging_state, &len) < 0)
            return fail(err, err_size, "paging state cut short");
        m->paging_state_len = len;
    }
    if (m->flags & BW_CQL_META_NO_METADATA)
        return 0;
    const char *ks = NULL, *table = NULL;
    size_t ks_len = 0, table_len = 0;
    int global = (m->flags & BW_CQL_META_GLOBAL_TABLES_SPEC) != 0;
    if (global && (bw_cql_get_string(c, &ks, &ks_len) < 0 ||
                   bw_cql_get_string(c, &table, &table_len) < 0)) {
        metadata_free(m);
        return fail(err, err_size, "global table spec cut short");
    }
    /* a column spec takes at least 4 bytes (an empty name and a type id) */
    if ((size_t)m->columns_count > c->left / 4) {
        metadata_free(m);
        return fail(err, err_size, "more columns than the body holds");
    }
    m->columns = calloc((size_t)m->columns_count + 1, sizeof *m->columns);
    if (m->columns == NULL) {
        metadata_free(m);
        return fail(err, err_size, "out of memory");
    }
    for (int32_t i = 0; i < m->columns_count; i++) {
        bw_cql_colspec *col = &m->columns[i];
        col->keyspace = ks;
        col->keyspace_len = ks_len;
        col->table = table;
        col->table_len = table_len;
        if ((!global && (bw_cql_get_string(c, &col->keyspace, &col->keyspace_len) < 0 ||
                         bw_cql_get_string(c, &col->table, &col->table_len) < 0)) ||
            bw_cql_get_string(c, &col->name, &col->name_len) < 0 ||
            read_option(c, 0, col) < 0) {
            metadata_free(m);
            return fail(err, err_size, "a column spec is cut short or has an unknown type");
        }
    }
    return 0;
}

static int read_rows(bw_cql_cursor *c, bw_cql_result *r, char *err, size_t err_size) {
    if (read_metadata(c, &r->metadata, 0, err, err_size) < 0)
        return -1;
    if (bw_cql_get_int(c, &r->rows_count) < 0 || r->rows_count < 0) {
        metadata_free(&r->metadata);
        return fail(err, err_size, "a missing or negative row count");
    }
    /* the cells: checked to be there, each [bytes] (null allowed), without reading further */
    bw_cql_cursor start = *c;
    int64_t cells = (int64_t)r->rows_count * r->metadata.columns_count;
    if (cells > 0 && (uint64_t)cells > c->left / 4) {
        metadata_free(&r->metadata);
        return fail(err, err_size, "more cells than the body holds");
    }
    for (int64_t i = 0; i < cells; i++) {
        const uint8_t *p;
        int32_t n;
        if (bw_cql_get_bytes(c, &p, &n) < 0) {
            metadata_free(&r->metadata);
            return fail(err, err_size, "a row's cell is cut short");
        }
    }
    r->rows = bw_cql_cursor_make(start.p, start.left - c->left);
    return 0;
}

int bw_cql_result_parse(const uint8_t *body, size_t n, bw_cql_result *r, char *err,
                        size_t err_size) {
    memset(r, 0, sizeof *r);
    bw_cql_cursor c = bw_cql_cursor_make(body, n);
    if (bw_cql_get_int(&c, &r->kind) < 0)
        return fail(err, err_size, "no kind");
    switch (r->kind) {
    case BW_CQL_RESULT_VOID:
        return 0;
    case BW_CQL_RESULT_ROWS:
        return read_rows(&c, r, err, err_size);
    case BW_CQL_RESULT_SET_KEYSPACE:
        if (bw_cql_get_string(&c, &r->keyspace, &r->keyspace_len) < 0)
            return fail(err, err_size, "keyspace cut short");
        return 0;
    case BW_CQL_RESULT_PREPARED:
        if (bw_cql_get_short_bytes(&c, &r->id, &r->id_len) < 0)
            return fail(err, err_size, "prepared id cut short");
        if (read_metadata(&c, &r->bind, 1, err, err_size) < 0)
            return -1;
        if (read_metadata(&c, &r->metadata, 0, err, err_size) < 0) {
            metadata_free(&r->bind);
            return -1;
        }
        return 0;
    case BW_CQL_RESULT_SCHEMA_CHANGE: {
        if (bw_cql_get_string(&c, &r->change, &r->change_len) < 0 ||
            bw_cql_get_string(&c, &r->target, &r->target_len) < 0 ||
            bw_cql_get_string(&c, &r->keyspace, &r->keyspace_len) < 0)
            return fail(err, err_size, "schema change cut short");
        int keyspace = r->target_len == 8 && memcmp(r->target, "KEYSPACE", 8) == 0;
        int function = (r->target_len == 8 && memcmp(r->target, "FUNCTION", 8) == 0) ||
                       (r->target_len == 9 && memcmp(r->target, "AGGREGATE", 9) == 0);
        if (!keyspace && bw_cql_get_string(&c, &r->name, &r->name_len) < 0)
            return fail(err, err_size, "schema change name cut short");
        if (function && bw_cql_get_string_list(&c, &r->arg_count, &r->args) < 0)
            return fail(err, err_size, "schema change arguments cut short");
        return 0;
    }
    default:
        snprintf(err, err_size, "malformed RESULT: unknown kind %d", (int)r->kind);
        return -1;
    }
}

void bw_cql_result_free(bw_cql_result *r) {
    metadata_free(&r->metadata);
    metadata_free(&r->bind);
}
