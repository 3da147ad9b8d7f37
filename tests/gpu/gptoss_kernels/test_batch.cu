/* test_batch.cu — the batched decode-step kernels (continuous batching) against their single-row
 * launchers, which test_kernels.cu checks against CPU loops: B rows, each its own sequence at its own
 * position through its own block table, must give what B separate one-row launches give (bit for bit
 * for K/V store and attention: the same kernel; to 1e-6 for RoPE: the same math in another kernel).
 * Covers gptoss_rope_rows (batch.cu) and gptoss_kv_store / gptoss_attention_at with B > 1 (kv_cache.cu,
 * attention.cu), and the fused row kernels of batch.cu against the launches they replace (bit for bit). Linked into the gptoss_kernels binary; main() in test_kernels.cu calls
 * gptoss_test_batch_kernels(). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "engines/gptoss_cuda/batch.cu"

#define TU_SEED 0xb47c4ull
#include "tests/gpu/gptoss_kernels/test_util.h"
extern "C" {
#include "common/gptoss/config.h"
}

static uint64_t b_rng = 0xb47c4ull;
static float brand(void) {
    b_rng ^= b_rng << 13; b_rng ^= b_rng >> 7; b_rng ^= b_rng << 17;
    return (float)((double)(b_rng >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static size_t brand_index(int n) { /* uniform-ish in [0, n) */
    b_rng ^= b_rng << 13; b_rng ^= b_rng >> 7; b_rng ^= b_rng << 17;
    return (size_t)((b_rng >> 11) % (uint64_t)n);
}

static std::vector<float> brandv(size_t n) {
    std::vector<float> v(n);
    for (auto &x : v) x = brand();
    return v;
}

static void yarn(float *inv, float *af) {
    gptoss_config c;
    memset(&c, 0, sizeof c);
    c.head_dim = 64; c.rope_theta = 150000; c.rope_factor = 32; c.rope_beta_fast = 32; c.rope_beta_slow = 1;
    c.rope_original_max_position = 4096; c.rope_truncate = 0;
    gptoss_yarn_inv_freq(&c, inv, af);
}

/* A shuffled page pool of 2 layers (layer 1 used) for rows at positions pos, each with its own table row of
 * *max_pages shuffled pages: the table ids, the random pool, and gptoss_kv's page_floats / layer_off. */
static void pool_make(const std::vector<int32_t> &pos, int kvd, int *max_pages, std::vector<int32_t> *ids,
                      std::vector<float> *pool, long long *pf, long long *loff) {
    const int P = GPTOSS_KV_PAGE;
    *max_pages = 0;
    for (int32_t p : pos) *max_pages = std::max(*max_pages, p / P + 1);
    const int npages = (int)pos.size() * *max_pages;
    ids->resize(npages);
    for (int i = 0; i < npages; i++) (*ids)[i] = i;
    for (int i = npages - 1; i > 0; i--) std::swap((*ids)[i], (*ids)[brand_index(i + 1)]);
    *pf = 2LL * 2 * P * kvd;
    *loff = 2LL * P * kvd;
    *pool = brandv((size_t)npages * *pf);
}

/* B rows at their own positions = B one-row gptoss_rope launches. */
static void test_rope_rows(int B, int heads) {
    const int D = GPTOSS_HEAD_DIM, ld = heads * D;
    float inv[32], af;
    yarn(inv, &af);
    std::vector<int32_t> pos(B);
    for (int b = 0; b < B; b++) pos[b] = (int32_t)((b * 2749 + 7) % 70001);
    auto x = brandv((size_t)B * ld);
    float *dinv = dev_upload(std::vector<float>(inv, inv + 32)), *x1 = dev_upload(x), *x2 = dev_upload(x);
    int32_t *dpos = dev_upload(pos);
    for (int b = 0; b < B; b++) CK(gptoss_rope(x1 + (size_t)b * ld, ld, 1, heads, pos[b], dinv, af, 0));
    CK(gptoss_rope_rows(x2, ld, B, heads, dpos, dinv, af, 0));
    auto a = dev_download(x1, x.size()), c = dev_download(x2, x.size());
    /* the one rotation (gptoss_rope_pair) in two kernels: bit for bit */
    int finite = 1;
    for (size_t i = 0; i < a.size(); i++) finite &= isfinite(c[i]) ? 1 : 0;
    const int same = !memcmp(a.data(), c.data(), a.size() * sizeof(float));
    char what[160];
    snprintf(what, sizeof what, "rope_rows B=%d heads=%d (positions up to 70000) = %d one-row ropes, bit for bit%s", B, heads, B,
             same ? "" : " (rel L2 below)");
    check_true(what, finite && same);
    if (!same) printf("     rel L2 %.1e\n", rel_l2(c, a));
    cudaFree(dinv); cudaFree(x1); cudaFree(x2); cudaFree(dpos);
}

/* B sequences in one shuffled page pool (2 layers, layer 1 used), each with its own block table row:
 * the batched K/V store and attention = B one-row launches through that row's table. */
static void test_rows_kv_attention(int B, int nh, int nkv, int window) {
    const int D = GPTOSS_HEAD_DIM, kvd = nkv * D;
    std::vector<int32_t> pos(B);
    for (int b = 0; b < B; b++) pos[b] = (int32_t)(5 + b * 61 + (b % 2) * 100); /* some past the window, some not */
    int max_pages;
    std::vector<int32_t> ids;
    std::vector<float> pool; /* every earlier key random; the stored row overwrites pos */
    long long pf, loff;
    pool_make(pos, kvd, &max_pages, &ids, &pool, &pf, &loff);
    auto q = brandv((size_t)B * nh * D), k = brandv((size_t)B * kvd), v = brandv((size_t)B * kvd);
    std::vector<uint16_t> sinks(nh);
    for (int h = 0; h < nh; h++) { float f = brand(); uint32_t u; memcpy(&u, &f, 4); sinks[h] = (uint16_t)(u >> 16); }
    float *pool1 = dev_upload(pool), *pool2 = dev_upload(pool), *dq = dev_upload(q), *dk = dev_upload(k), *dv = dev_upload(v);
    float *o1 = dev_upload(std::vector<float>((size_t)B * nh * D, NAN)), *o2 = dev_upload(std::vector<float>((size_t)B * nh * D, NAN));
    int32_t *dtab = dev_upload(ids), *dpos = dev_upload(pos);
    uint16_t *ds = dev_upload(sinks);
    gptoss_kv kv;
    kv.table = dtab; kv.max_pages = max_pages; kv.kvd = kvd; kv.page_floats = pf; kv.layer_off = loff;
    /* one row at a time: table row b seen as row 0, position pos[b] */
    kv.pool = pool1;
    for (int b = 0; b < B; b++) {
        gptoss_kv one = kv;
        one.table = dtab + (size_t)b * max_pages;
        CK(gptoss_kv_store(dk + (size_t)b * kvd, dv + (size_t)b * kvd, 1, dpos + b, one, 0));
        CK(gptoss_attention_at(dq + (size_t)b * nh * D, one, ds, dpos + b, 1, nh, nkv, window, o1 + (size_t)b * nh * D, 0));
    }
    /* all B rows in one launch each */
    kv.pool = pool2;
    CK(gptoss_kv_store(dk, dv, B, dpos, kv, 0));
    CK(gptoss_attention_at(dq, kv, ds, dpos, B, nh, nkv, window, o2, 0));
    auto a = dev_download(o1, (size_t)B * nh * D), c = dev_download(o2, (size_t)B * nh * D);
    auto pa = dev_download(pool1, pool.size()), pb = dev_download(pool2, pool.size());
    int finite = 1;
    for (float f : c) finite &= isfinite(f) ? 1 : 0;
    char what[160];
    snprintf(what, sizeof what, "kv_store + attention_at B=%d rows (own tables, heads %d/%d, window %d) = %d one-row launches bit for bit",
             B, nh, nkv, window, B);
    check_true(what, finite && !memcmp(a.data(), c.data(), a.size() * sizeof(float)) &&
                     !memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)));
    cudaFree(pool1); cudaFree(pool2); cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(o1); cudaFree(o2);
    cudaFree(dtab); cudaFree(dpos); cudaFree(ds);
}

static uint16_t bbf16(void) { /* a random bf16 in (-1, 1) */
    float f = brand();
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

template <typename T> static int bits_equal(const T *d1, const T *d2, size_t n) {
    auto a = dev_download(d1, n), b = dev_download(d2, n);
    return !memcmp(a.data(), b.data(), n * sizeof(T));
}

/* gptoss_rows_norm_split = gptoss_moe_combine (when combine), gptoss_rmsnorm, gptoss_tc_split: x, h and the parts bit for
 * bit. */
static void test_rows_norm_split(int B, int H, int S, int combine) {
    const float eps = 1e-5f;
    auto x = brandv((size_t)B * H), dn = brandv((size_t)4 * B * H), rw = brandv((size_t)4 * B);
    std::vector<int32_t> pof(4 * B);
    for (int i = 0; i < 4 * B; i++) pof[i] = i;
    for (int i = 4 * B - 1; i > 0; i--) std::swap(pof[i], pof[brand_index(i + 1)]);
    std::vector<uint16_t> nw(H);
    for (auto &v : nw) v = bbf16();
    float *x1 = dev_upload(x), *x2 = dev_upload(x), *ddn = dev_upload(dn), *drw = dev_upload(rw);
    float *h1 = dev_upload(std::vector<float>((size_t)B * H, NAN)), *h2 = dev_upload(std::vector<float>((size_t)B * H, NAN));
    int32_t *dpof = dev_upload(pof);
    uint16_t *dnw = dev_upload(nw), *xs1 = dev_upload(std::vector<uint16_t>((size_t)S * B * H, 0xFFFF)),
             *xs2 = dev_upload(std::vector<uint16_t>((size_t)S * B * H, 0x7FFF));
    if (combine) CK(gptoss_moe_combine(ddn, drw, dpof, B, H, x1, 0));
    CK(gptoss_rmsnorm(x1, dnw, B, H, eps, h1, 0));
    CK(gptoss_tc_split(h1, H, NULL, NULL, NULL, 0, B, H, S, xs1, 0));
    CK(gptoss_rows_norm_split(combine ? ddn : NULL, drw, dpof, x2, dnw, B, H, eps, S, h2, xs2, 0));
    char what[200];
    snprintf(what, sizeof what, "rows_norm_split B=%d H=%d parts %d%s = %srmsnorm + split: x, h and parts bit for bit", B, H,
             S, combine ? " with the combine" : "", combine ? "moe_combine + " : "");
    check_true(what, bits_equal(x1, x2, (size_t)B * H) && bits_equal(h1, h2, (size_t)B * H) &&
                     bits_equal(xs1, xs2, (size_t)S * B * H));
    cudaFree(x1); cudaFree(x2); cudaFree(ddn); cudaFree(drw); cudaFree(h1); cudaFree(h2); cudaFree(dpof); cudaFree(dnw);
    cudaFree(xs1); cudaFree(xs2);
}

/* gptoss_rows_qkv_finish = the parts' reduce (gptoss_tc_reduce, the same sums as the segments' reduce), gptoss_rope_rows
 * on q and k, gptoss_kv_store: q and the whole page pool bit for bit. */
static void test_rows_qkv_finish(int B, int nh, int nkv, int S) {
    const int D = GPTOSS_HEAD_DIM, QD = nh * D, kvd = nkv * D, QKV = QD + 2 * kvd;
    float inv[32], af;
    yarn(inv, &af);
    std::vector<int32_t> pos(B);
    for (int b = 0; b < B; b++) pos[b] = (int32_t)((b * 2749 + 7) % 3001);
    int max_pages;
    std::vector<int32_t> ids;
    std::vector<float> pool;
    long long pf, loff;
    pool_make(pos, kvd, &max_pages, &ids, &pool, &pf, &loff);
    auto ys = brandv((size_t)S * B * QKV);
    std::vector<uint16_t> bias(QKV);
    for (auto &v : bias) v = bbf16();
    float *dys = dev_upload(ys), *pool1 = dev_upload(pool), *pool2 = dev_upload(pool), *dinv = dev_upload(std::vector<float>(inv, inv + 32));
    float *y = dev_upload(std::vector<float>((size_t)B * QKV, NAN)), *q1 = dev_upload(std::vector<float>((size_t)B * QD, NAN));
    float *q2 = dev_upload(std::vector<float>((size_t)B * QD, NAN)), *kn = dev_upload(std::vector<float>((size_t)B * kvd, NAN));
    float *vn = dev_upload(std::vector<float>((size_t)B * kvd, NAN));
    int32_t *dtab = dev_upload(ids), *dpos = dev_upload(pos);
    uint16_t *db = dev_upload(bias);
    gptoss_kv kv;
    kv.table = dtab; kv.max_pages = max_pages; kv.kvd = kvd; kv.page_floats = pf; kv.layer_off = loff;
    CK(gptoss_tc_reduce(dys, NULL, NULL, 0, B, QKV, S, db, y, QKV, 0, 0));
    CK(cudaMemcpy2D(q1, QD * 4, y, QKV * 4, QD * 4, B, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy2D(kn, kvd * 4, y + QD, QKV * 4, kvd * 4, B, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy2D(vn, kvd * 4, y + QD + kvd, QKV * 4, kvd * 4, B, cudaMemcpyDeviceToDevice));
    CK(gptoss_rope_rows(q1, QD, B, nh, dpos, dinv, af, 0));
    CK(gptoss_rope_rows(kn, kvd, B, nkv, dpos, dinv, af, 0));
    kv.pool = pool1;
    CK(gptoss_kv_store(kn, vn, B, dpos, kv, 0));
    kv.pool = pool2;
    CK(gptoss_rows_qkv_finish(dys, QKV, B, S, db, nh, nkv, dpos, dinv, af, q2, kv, 0));
    /* the same sums and the one rotation (gptoss_rope_pair) in other kernels: bit for bit */
    auto qa = dev_download(q1, (size_t)B * QD), qb = dev_download(q2, (size_t)B * QD);
    auto pa = dev_download(pool1, pool.size()), pb = dev_download(pool2, pool.size());
    const int same = !memcmp(qa.data(), qb.data(), qa.size() * 4) && !memcmp(pa.data(), pb.data(), pa.size() * 4);
    char what[240];
    snprintf(what, sizeof what, "rows_qkv_finish B=%d heads %d/%d parts %d = reduce + 2 rope_rows + kv_store, bit for bit", B, nh,
             nkv, S);
    check_true(what, same);
    if (!same) printf("     q rel L2 %.1e, cache rel L2 %.1e\n", rel_l2(qb, qa), rel_l2(pb, pa));
    cudaFree(dys); cudaFree(pool1); cudaFree(pool2); cudaFree(dinv); cudaFree(y); cudaFree(q1); cudaFree(q2); cudaFree(kn);
    cudaFree(vn); cudaFree(dtab); cudaFree(dpos); cudaFree(db);
}

/* gptoss_moe_router_decode_add = the dense reduce with accumulate (gptoss_tc_reduce: the sums of tc_reduce_segs_kernel)
 * and then gptoss_moe_router_decode: x, h_sw, ids, weights, logits and the group table bit for bit. */
static void test_router_decode_add(int T, int H, int E, int S, int with_bias) {
    const float eps = 1e-5f;
    auto x = brandv((size_t)T * H), ys = brandv((size_t)S * T * H);
    std::vector<uint16_t> ob(H), nw(H), rw((size_t)E * H), rb(E);
    for (auto *v : {&ob, &nw, &rw, &rb})
        for (auto &u : *v) u = bbf16();
    const int G = gptoss_moe_groups_ints(T);
    float *x1 = dev_upload(x), *x2 = dev_upload(x), *dys = dev_upload(ys);
    float *hs1 = dev_upload(std::vector<float>((size_t)T * H, NAN)), *hs2 = dev_upload(std::vector<float>((size_t)T * H, NAN));
    float *w1 = dev_upload(std::vector<float>((size_t)T * 4, NAN)), *w2 = dev_upload(std::vector<float>((size_t)T * 4, NAN));
    float *rl1 = dev_upload(std::vector<float>((size_t)T * E, NAN)), *rl2 = dev_upload(std::vector<float>((size_t)T * E, NAN));
    int32_t *id1 = dev_upload(std::vector<int32_t>((size_t)T * 4, -1)), *id2 = dev_upload(std::vector<int32_t>((size_t)T * 4, -1));
    int32_t *g1 = dev_upload(std::vector<int32_t>(G, -1)), *g2 = dev_upload(std::vector<int32_t>(G, -1));
    int32_t *c1 = dev_upload(std::vector<int32_t>(1 + T, 0)), *c2 = dev_upload(std::vector<int32_t>(1 + T, 0));
    uint16_t *dob = dev_upload(ob), *dnw = dev_upload(nw), *drw = dev_upload(rw), *drb = dev_upload(rb);
    const uint16_t *bias = with_bias ? dob : NULL;
    CK(gptoss_tc_reduce(dys, NULL, NULL, 0, T, H, S, bias, x1, H, 1, 0));
    CK(gptoss_moe_router_decode(x1, dnw, eps, drw, drb, T, H, E, hs1, id1, w1, g1, rl1, c1, 0));
    /* and the F16 form's pre-staged token rows = gptoss_mxfp4_stage_f16 of h_sw */
    const size_t su = (size_t)T * gptoss_mxfp4_stage_f16_units(H) * 4;
    uint32_t *st1 = dev_upload(std::vector<uint32_t>(su, 0xFFFFFFFFu)), *st2 = dev_upload(std::vector<uint32_t>(su, 0x7FFF7FFFu));
    CK(gptoss_mxfp4_stage_f16(hs1, H, 1, NULL, T, H, st1, 0));
    /* and gptoss_moe_route's tables from the router's last block: counts and offsets equal, each expert's pairs in
     * its slots (any order within them, as the route's atomics), every slot's token that pair's */
    const int P = 4 * T;
    int32_t *rc1 = dev_upload(std::vector<int32_t>(E, -1)), *ro1 = dev_upload(std::vector<int32_t>(E, -1));
    int32_t *rt1 = dev_upload(std::vector<int32_t>(P, -1)), *rp1 = dev_upload(std::vector<int32_t>(P, -1));
    int32_t *rc2 = dev_upload(std::vector<int32_t>(E, -1)), *ro2 = dev_upload(std::vector<int32_t>(E, -1));
    int32_t *rt2 = dev_upload(std::vector<int32_t>(P, -1)), *rp2 = dev_upload(std::vector<int32_t>(P, -1));
    CK(gptoss_moe_route(id1, T, E, rc1, ro1, rt1, rp1, 0));
    const gptoss_moe_route_out route = {rc2, ro2, rt2, rp2};
    CK(gptoss_moe_router_decode_add(x2, dys, S, bias, dnw, eps, drw, drb, T, H, E, hs2, id2, w2, g2, rl2, c2, st2, &route,
                                    0));
    int route_ok = bits_equal(rc1, rc2, (size_t)E) && bits_equal(ro1, ro2, (size_t)E);
    {
        auto ids = dev_download(id1, (size_t)P), cnt = dev_download(rc2, (size_t)E), off = dev_download(ro2, (size_t)E);
        auto pt = dev_download(rt2, (size_t)P), po = dev_download(rp2, (size_t)P);
        std::vector<int> used(P, 0);
        for (int p = 0; p < P; p++) {
            const int e = ids[p], sl = po[p];
            const int in = e >= 0 && e < E && sl >= off[e] && sl < off[e] + cnt[e];
            route_ok &= in && pt[sl] == p / 4;
            if (in) used[sl]++;
        }
        for (int u : used) route_ok &= u == 1;
    }
    cudaFree(rc1); cudaFree(ro1); cudaFree(rt1); cudaFree(rp1); cudaFree(rc2); cudaFree(ro2); cudaFree(rt2); cudaFree(rp2);
    char what[240];
    snprintf(what, sizeof what,
             "router_decode_add T=%d H=%d E=%d parts %d%s = reduce + router_decode + stage_f16: x, h_sw, ids, w, logits, "
             "groups, staged rows bit for bit; the route's tables",
             T, H, E, S, with_bias ? " bias" : "");
    check_true(what, bits_equal(x1, x2, (size_t)T * H) && bits_equal(hs1, hs2, (size_t)T * H) &&
                     bits_equal(id1, id2, (size_t)T * 4) && bits_equal(w1, w2, (size_t)T * 4) &&
                     bits_equal(rl1, rl2, (size_t)T * E) && bits_equal(g1, g2, (size_t)G) && bits_equal(c1, c2, (size_t)1 + T) &&
                     bits_equal(st1, st2, su) && route_ok);
    cudaFree(st1);
    cudaFree(st2);
    /* refused before any launch: more than one block's registers of x, or no parts */
    check_true("router_decode_add refuses H > GPTOSS_ROUTER_ADD_MAX_H and y NULL",
               gptoss_moe_router_decode_add(x2, dys, S, bias, dnw, eps, drw, drb, T, 3104, E, hs2, id2, w2, g2, rl2, c2, NULL, NULL, 0) ==
                       cudaErrorInvalidValue &&
                   gptoss_moe_router_decode_add(x2, NULL, S, bias, dnw, eps, drw, drb, T, H, E, hs2, id2, w2, g2, rl2, c2, NULL, NULL, 0) ==
                       cudaErrorInvalidValue);
    for (void *p : {(void *)x1, (void *)x2, (void *)dys, (void *)hs1, (void *)hs2, (void *)w1, (void *)w2, (void *)rl1,
                    (void *)rl2, (void *)id1, (void *)id2, (void *)g1, (void *)g2, (void *)c1, (void *)c2, (void *)dob,
                    (void *)dnw, (void *)drw, (void *)drb})
        cudaFree(p);
}

/* Called by main() in test_kernels.cu; adds its counts there. */
void gptoss_test_batch_kernels(int *checks, int *failed) {
    test_rope_rows(1, 64);
    test_rope_rows(5, 8);
    test_rope_rows(64, 8);
    test_rows_kv_attention(2, 8, 2, 0);
    test_rows_kv_attention(5, 64, 8, 128);
    test_rows_kv_attention(8, 64, 8, 0);
    test_rows_norm_split(9, 2880, 2, 1);
    test_rows_norm_split(64, 2880, 2, 1);
    test_rows_norm_split(37, 2880, 3, 0);
    test_rows_norm_split(5, 64, 2, 1);
    test_rows_qkv_finish(9, 64, 8, 2);
    test_rows_qkv_finish(64, 64, 8, 2);
    test_rows_qkv_finish(37, 8, 2, 3);
    test_router_decode_add(9, 2880, 32, 2, 1);
    test_router_decode_add(64, 2880, 32, 2, 1);
    test_router_decode_add(37, 2880, 32, 3, 0);
    test_router_decode_add(5, 64, 8, 2, 1);
    *checks += tu_checks;
    *failed += tu_failed;
}
