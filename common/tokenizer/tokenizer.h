/* tokenizer.h — Hugging Face tokenizer.json (byte-level BPE) in C: encode, decode, streaming decode.
 *
 * The node tokenizes prompts and detokenizes generated ids with this module. It must produce exactly
 * the ids Hugging Face `tokenizers` produces for `encode(text, add_special_tokens=False)`, or the
 * model sees a different prompt. Supported tokenizer.json shape (gpt-oss o200k_harmony, Llama 3 and
 * other GPT-2-style byte-level BPE files):
 *
 *   normalizer     null
 *   pre_tokenizer  Sequence[Split(Regex|String, Isolated, invert=false), ByteLevel(use_regex=false)]
 *                  or ByteLevel(use_regex=true|false) alone; add_prefix_space=false
 *   model          BPE (vocab + merges, either merge format), no dropout, no subword prefix/suffix,
 *                  ignore_merges honoured
 *   decoder        ByteLevel
 *   added_tokens   matched in the raw text before pre-tokenization (leftmost, longest first);
 *                  single_word / lstrip / rstrip must be false
 *   post_processor ignored: encode never adds BOS/EOS (add_special_tokens=False semantics)
 *
 * Anything else fails at load with TOKENIZER_EUNSUPPORTED and a message "unsupported component: …"
 * naming the JSON path (e.g. a Qwen 2.5 file: "unsupported component: normalizer NFC").
 *
 * Pipeline of tokenizer_encode: (1) invalid UTF-8 is replaced by U+FFFD, one per maximal invalid
 * subpart (as Rust's String::from_utf8_lossy, Python's errors="replace", WHATWG TextDecoder), or
 * refused with TOKENIZER_EUTF8 under TOKENIZER_ENCODE_STRICT_UTF8; (2) added tokens are cut out of
 * the text; (3) each remaining segment is split by the pre-tokenizer regex, run by PCRE2 (UTF, UCP,
 * JIT) with `\s` meaning the Unicode White_Space property as in Oniguruma, which HF uses; (4) every
 * piece is encoded by byte-level BPE: the whole piece if it is a vocab entry and ignore_merges is
 * set, else by applying merges lowest rank first (leftmost on ties), exactly as HF's BPE model.
 *
 * Loading: vocab and merges go through a dedicated single-pass JSON reader (tok_json.h); only the
 * small remaining sections go through jansson (~250 ms for the 27 MB gpt-oss file on a quiet
 * machine). tokenizer_create_from_file also keeps a binary cache of the built tables keyed by the
 * file's sha256 ($LLMR_TOKENIZER_CACHE, default $LLMR_CACHE/tokenizer-bin or
 * ~/.cache/llmr/tokenizer-bin; LLMR_TOKENIZER_CACHE=off disables it): later loads of the same
 * content take tens of ms. A missing, stale or damaged cache only means the JSON is read again.
 *
 * Threading: a loaded tokenizer is immutable. Any number of threads may call encode / decode /
 * lookups on one tokenizer concurrently (each call uses its own scratch memory). A decoder belongs to
 * one stream and one thread at a time; many decoders may share one tokenizer. The tokenizer must
 * outlive its decoders.
 *
 * Errors: every fallible function returns a tokenizer_status; results come through *_out parameters
 * (untouched on failure); err/err_size (may be NULL/0) receives a NUL-terminated human message naming
 * the cause (file, JSON path, byte offset, id, limit). */
#ifndef LLMR_TOKENIZER_H
#define LLMR_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. X-macro: name, value, description (tokenizer_strerror returns the description). */
#define TOKENIZER_STATUS_LIST(X) \
    X(TOKENIZER_OK,           0, "ok") \
    X(TOKENIZER_EIO,          1, "cannot read tokenizer file") \
    X(TOKENIZER_EPARSE,       2, "malformed tokenizer.json") \
    X(TOKENIZER_EUNSUPPORTED, 3, "unsupported tokenizer component") \
    X(TOKENIZER_ENOMEM,       4, "out of memory") \
    X(TOKENIZER_EINVAL,       5, "invalid argument") \
    X(TOKENIZER_EUTF8,        6, "invalid UTF-8 in input text") \
    X(TOKENIZER_EBADID,       7, "token id unknown to this tokenizer") \
    X(TOKENIZER_EREGEX,       8, "pre-tokenizer regex failed")

typedef enum tokenizer_status {
#define TOKENIZER_X_(name, value, text) name = value,
    TOKENIZER_STATUS_LIST(TOKENIZER_X_)
#undef TOKENIZER_X_
} tokenizer_status;

/* Flags for tokenizer_encode. */
#define TOKENIZER_ENCODE_NO_SPECIAL   0x1u /* added tokens marked "special" are plain text (HF
                                            * split_special_tokens=True); non-special added tokens
                                            * are still matched, as in HF */
#define TOKENIZER_ENCODE_STRICT_UTF8  0x2u /* invalid UTF-8 is TOKENIZER_EUTF8 instead of U+FFFD */

/* Flags for tokenizer_decode and tokenizer_decoder_create. */
#define TOKENIZER_DECODE_LOSSY        0x1u /* invalid UTF-8 in the output becomes U+FFFD per maximal
                                            * subpart (= HF decode's from_utf8_lossy); without it the
                                            * exact bytes are returned */
#define TOKENIZER_DECODE_SKIP_SPECIAL 0x2u /* special added tokens produce no output (HF
                                            * skip_special_tokens=True) */
#define TOKENIZER_DECODE_SKIP_UNKNOWN 0x4u /* ids the tokenizer does not know are skipped (as HF
                                            * decode does) instead of failing with TOKENIZER_EBADID */

typedef struct tokenizer tokenizer;
typedef struct tokenizer_decoder tokenizer_decoder;

/* Returns the constant description of a status code ("unknown status" for other values). */
const char *tokenizer_strerror(int status);

/* Loads a tokenizer.json (through the binary cache, see above). On success *out owns the tokenizer
 * (free with tokenizer_destroy). On failure *out is untouched and err names the cause: the path
 * and, for parse errors, the line and JSON path; TOKENIZER_EUNSUPPORTED messages start with
 * "unsupported component: ". */
int tokenizer_create_from_file(const char *path, tokenizer **out, char *err, size_t err_size);

/* 1 if the tokenizer came from the binary cache rather than from parsing the JSON, else 0. */
int tokenizer_loaded_from_cache(const tokenizer *tok);

/* Same, from a tokenizer.json already in memory (len bytes; need not be NUL-terminated), always
 * parsed (no cache). `name` is used in messages (e.g. the origin of the buffer); may be NULL. The
 * buffer is not retained. */
int tokenizer_create_from_buffer(const char *json, size_t len, const char *name, tokenizer **out,
                                 char *err, size_t err_size);

/* Frees a tokenizer. Accepts NULL. No decoder of it may be used afterwards. */
void tokenizer_destroy(tokenizer *tok);

/* Encodes `len` bytes of text (need not be NUL-terminated; embedded NULs are ordinary text). On
 * success *ids_out is a malloc'd array of *n_out ids that the caller frees with free() (non-NULL even
 * when *n_out is 0). Flags: TOKENIZER_ENCODE_*. Errors: TOKENIZER_EUTF8 (strict mode), ENOMEM,
 * EREGEX (PCRE2 hit a resource limit; message has the byte offset). Thread-safe. */
int tokenizer_encode(const tokenizer *tok, const char *text, size_t len, unsigned flags,
                     int32_t **ids_out, size_t *n_out, char *err, size_t err_size);

/* Number of ids tokenizer_encode would return, without keeping them (usage accounting).
 * Same flags and errors as tokenizer_encode. */
int tokenizer_count(const tokenizer *tok, const char *text, size_t len, unsigned flags,
                    size_t *n_out, char *err, size_t err_size);

/* Decodes ids to text. On success *text_out is a malloc'd, NUL-terminated buffer of *len_out bytes
 * (the NUL is not counted) that the caller frees with free(). Without TOKENIZER_DECODE_LOSSY the
 * output is the exact concatenation of each token's bytes, possibly invalid UTF-8. Added tokens
 * decode to their content. Errors: TOKENIZER_EBADID (message names the id and its index), ENOMEM. */
int tokenizer_decode(const tokenizer *tok, const int32_t *ids, size_t n, unsigned flags,
                     char **text_out, size_t *len_out, char *err, size_t err_size);

/* Size of the id space: highest known id + 1 (gpt-oss: 200019). Ids below it may still be unknown
 * (gaps between the vocab and the added tokens); see tokenizer_id_known. */
size_t tokenizer_vocab_size(const tokenizer *tok);

/* 1 if id names a vocab entry or an added token, else 0. */
int tokenizer_id_known(const tokenizer *tok, int32_t id);

/* 1 if id is an added token with "special": true, else 0. */
int tokenizer_id_is_special(const tokenizer *tok, int32_t id);

/* The piece of an id as spelled in tokenizer.json (byte-level alphabet, e.g. "Ġhello"; an added
 * token's content), with *len_out its length. Returns NULL for an unknown id. The string is owned by
 * the tokenizer, NUL-terminated, valid until tokenizer_destroy. */
const char *tokenizer_id_to_piece(const tokenizer *tok, int32_t id, size_t *len_out);

/* The bytes an id decodes to (e.g. " hello"; an added token's content), *len_out their length, or
 * NULL for an unknown id. Owned by the tokenizer; NOT NUL-terminated. */
const char *tokenizer_id_to_bytes(const tokenizer *tok, int32_t id, size_t *len_out);

/* The id of a piece spelled as in tokenizer.json (a vocab key or an added token's content), or -1. */
int32_t tokenizer_piece_to_id(const tokenizer *tok, const char *piece, size_t len);

/* The id of an added token whose content is exactly `text` (NUL-terminated), e.g. "<|return|>"
 * -> 200002, or -1 when there is none. */
int32_t tokenizer_special_id(const tokenizer *tok, const char *text);

/* Number of added tokens, and the i-th one (0 <= i < count) as id; -1 when i is out of range. */
size_t tokenizer_added_count(const tokenizer *tok);
int32_t tokenizer_added_id(const tokenizer *tok, size_t i);

/* --- incremental (streaming) decoder --------------------------------------------------------
 * Feeds ids one at a time and returns only complete UTF-8: bytes of a character split across
 * tokens are held back until the character completes. Invalid bytes are emitted as soon as they are
 * known invalid (U+FFFD with TOKENIZER_DECODE_LOSSY, else raw). The concatenation of every push
 * output and the final flush equals tokenizer_decode of all pushed ids with the same flags, byte for
 * byte. */

/* Creates a decoder for one stream. flags: TOKENIZER_DECODE_*. Returns NULL only on out-of-memory. */
tokenizer_decoder *tokenizer_decoder_create(const tokenizer *tok, unsigned flags);

/* Frees a decoder. Accepts NULL. */
void tokenizer_decoder_destroy(tokenizer_decoder *dec);

/* Pushes one id. On success *out and *len_out give the newly complete text (possibly empty), owned by
 * the decoder and valid until its next call. Errors: TOKENIZER_EBADID (unknown id, unless
 * SKIP_UNKNOWN; the decoder state is unchanged, so the stream may continue), ENOMEM. */
int tokenizer_decoder_push(tokenizer_decoder *dec, int32_t id, const char **out, size_t *len_out,
                           char *err, size_t err_size);

/* Ends the stream: returns the held-back bytes exactly as tokenizer_decode would end (raw, or one
 * U+FFFD with LOSSY), then resets the decoder for a new stream. Never fails. */
void tokenizer_decoder_flush(tokenizer_decoder *dec, const char **out, size_t *len_out);

/* Number of ids pushed since creation or the last flush (usage accounting). */
size_t tokenizer_decoder_count(const tokenizer_decoder *dec);

#ifdef __cplusplus
}
#endif
#endif
