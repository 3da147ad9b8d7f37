/* libFuzzer target for the harmony output parser: arbitrary token streams.
 * Each input byte b < 12 is a special token (start, end, message, channel, constrain, return, call,
 * endoftext, or an unknown id); any other byte starts a text piece of (b % 6) + 1 following bytes.
 * Invariants: no crash/leak, every delta and the final message convert to JSON (valid UTF-8).
 *   make fuzz && build/fuzz/fuzz_harmony -max_total_time=60
 */
// fuzz-sources: common/harmony/harmony.c
#include "common/harmony/harmony.h"

#include <stdlib.h>

static void check(const harmony_delta *d) {
    if (d->kind == HARMONY_DELTA_NONE) return;
    json_t *j = harmony_delta_json(d);
    if (!j) abort();
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint32_t ids[] = { HARMONY_START, HARMONY_END, HARMONY_MESSAGE, HARMONY_CHANNEL, HARMONY_CONSTRAIN,
                                    HARMONY_RETURN, HARMONY_CALL, HARMONY_ENDOFTEXT, 200013, 200000, 199998, 200018 };
    harmony_opts o;
    harmony_opts_default(&o);
    o.start_outside = size && (data[0] & 0x80);
    o.call_id_prefix = size && (data[0] & 0x40) ? "id" : NULL;
    harmony_parser *p = harmony_create(&o);
    if (!p) return 0;
    harmony_delta d;
    size_t i = size ? 1 : 0;
    while (i < size) {
        uint8_t b = data[i++];
        if (b < 12) {
            if (harmony_push(p, ids[b], "<|x|>", 5, &d) < 0) abort();
        } else {
            size_t n = (size_t)(b % 6) + 1;
            if (n > size - i) n = size - i;
            if (harmony_push(p, 1000 + b, (const char *)data + i, n, &d) < 0) abort();
            i += n;
        }
        check(&d);
    }
    if (harmony_finish(p, size & 1, &d) < 0) abort();
    check(&d);
    if (!harmony_finish_reason(p)) abort();
    json_t *m = harmony_message_json(p);
    if (!m) abort();
    char *s = json_dumps(m, 0);
    if (!s) abort();
    free(s);
    json_decref(m);
    harmony_destroy(p);
    return 0;
}
