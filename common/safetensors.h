/* safetensors.h — a strict reader for the safetensors file format.
 *
 * File layout: 8-byte little-endian header length N, then N bytes of UTF-8 JSON, then the data
 * section. The JSON maps tensor names to {"dtype", "shape", "data_offsets":[begin,end]} (offsets
 * relative to the data section) plus an optional "__metadata__" object of string values.
 *
 * The reader is strict (every rule of the reference implementation, and a little more):
 *   - the file holds the 8-byte length; N <= 100 MB; 8 + N within the file;
 *   - the header is valid UTF-8 JSON, an object, without duplicate keys; leading/trailing whitespace ok;
 *   - each tensor has a known dtype, a shape of non-negative integers (at most LLMR_ST_MAX_DIMS),
 *     data_offsets of two non-negative integers with begin <= end;
 *   - element count x dtype bits is a whole number of bytes, equal to end - begin, without overflow;
 *   - tensors sorted by offset tile the data section exactly: the first starts at 0, each starts where
 *     the previous ended (no gap, no overlap), and the last ends at the end of the file;
 *   - "__metadata__" values are strings.
 * Every rejection carries a message naming the tensor and the rule it broke. */
#ifndef LLMR_SAFETENSORS_H
#define LLMR_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define LLMR_ST_MAX_HEADER (100u * 1000u * 1000u)
#define LLMR_ST_MAX_DIMS 8

typedef enum llmr_st_dtype {
    LLMR_ST_BOOL, LLMR_ST_U8, LLMR_ST_I8, LLMR_ST_F8_E5M2, LLMR_ST_F8_E4M3, LLMR_ST_F8_E8M0,
    LLMR_ST_I16, LLMR_ST_U16, LLMR_ST_F16, LLMR_ST_BF16, LLMR_ST_I32, LLMR_ST_U32, LLMR_ST_F32,
    LLMR_ST_F64, LLMR_ST_I64, LLMR_ST_U64, LLMR_ST_F4, LLMR_ST_F6_E2M3, LLMR_ST_F6_E3M2,
    LLMR_ST_DTYPE_COUNT
} llmr_st_dtype;

typedef enum llmr_st_status {
    LLMR_ST_OK = 0,
    LLMR_ST_ERR_IO,               /* the file could not be opened or read */
    LLMR_ST_ERR_HEADER_TOO_SMALL, /* fewer than 8 bytes */
    LLMR_ST_ERR_HEADER_TOO_LARGE, /* N over 100 MB */
    LLMR_ST_ERR_HEADER_LENGTH,    /* 8 + N past the end of the file */
    LLMR_ST_ERR_HEADER_UTF8,      /* header is not valid UTF-8 */
    LLMR_ST_ERR_HEADER_JSON,      /* not JSON, not an object, wrong field types, unknown dtype, duplicates */
    LLMR_ST_ERR_TENSOR_INFO,      /* shape x dtype size differs from the byte range */
    LLMR_ST_ERR_OFFSET,           /* ranges overlap, leave gaps or do not start at 0 */
    LLMR_ST_ERR_INCOMPLETE,       /* data section shorter or longer than the tensors need */
    LLMR_ST_ERR_OVERFLOW,         /* size arithmetic overflows 64 bits */
    LLMR_ST_ERR_MISALIGNED,       /* sub-byte dtype with an element count that is not whole bytes */
    LLMR_ST_ERR_NOMEM,
} llmr_st_status;

typedef struct llmr_st_tensor {
    const char *name;
    llmr_st_dtype dtype;
    int ndim;
    uint64_t shape[LLMR_ST_MAX_DIMS];
    uint64_t begin, end;          /* byte range within the data section */
} llmr_st_tensor;

typedef struct llmr_safetensors llmr_safetensors; /* opaque: one parsed file header */

/* Parses a header from memory. buf holds the first buf_len bytes of a file of file_size bytes and must
 * contain the whole header (8 + N bytes). On success *out owns copies of everything it needs. */
llmr_st_status llmr_st_parse(const uint8_t *buf, size_t buf_len, uint64_t file_size,
                             llmr_safetensors **out, char *err, size_t err_size);

/* Reads and parses the header of the file at path (only the header is read). */
llmr_st_status llmr_st_open(const char *path, llmr_safetensors **out, char *err, size_t err_size);

void llmr_st_destroy(llmr_safetensors *st);

size_t llmr_st_count(const llmr_safetensors *st);
/* Tensors in data-offset order. */
const llmr_st_tensor *llmr_st_at(const llmr_safetensors *st, size_t i);
const llmr_st_tensor *llmr_st_find(const llmr_safetensors *st, const char *name);
/* Absolute file offset of the data section (8 + N). */
uint64_t llmr_st_data_offset(const llmr_safetensors *st);
uint64_t llmr_st_file_size(const llmr_safetensors *st);
/* "__metadata__" value for key, or NULL. */
const char *llmr_st_metadata(const llmr_safetensors *st, const char *key);

/* Maps the file read-only (after llmr_st_open) and returns the start of the data section; the mapping
 * lives until llmr_st_destroy. Returns NULL with a message on failure. */
const uint8_t *llmr_st_map_data(llmr_safetensors *st, char *err, size_t err_size);

const char *llmr_st_dtype_name(llmr_st_dtype d);
int llmr_st_dtype_from_name(const char *name); /* -1 if unknown */
unsigned llmr_st_dtype_bits(llmr_st_dtype d);
uint64_t llmr_st_numel(const llmr_st_tensor *t);
const char *llmr_st_strerror(llmr_st_status s);

#endif
