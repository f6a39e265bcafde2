/* Attention with relative position representations, forward and backward, one build: included
 * by relative.c once per build with SUFFIX (name suffix), TARGET (function attribute, may be
 * empty) and EXP (an exp of vec_math.h) defined. See relative.c for the problem and the
 * layout of the buffers. */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SUFFIX)

/* Σ_c a_c·(b_c + e_c) over d floats: 16 independent lanes, summed as a tree of halves
 * (sum_lanes, vec_math.h). */
TARGET static float FN(dot_sum_)(const float *restrict a, const float *restrict b,
                                const float *restrict e, Py_ssize_t d) {
    float lane[16] = {0};
    Py_ssize_t c = 0;
    for (; c + 16 <= d; c += 16)
        for (int l = 0; l < 16; l++) lane[l] += a[c + l] * (b[c + l] + e[c + l]);
    float s = sum_lanes(lane);
    for (; c < d; c++) s += a[c] * (b[c] + e[c]);
    return s;
}

/* out = Σ_t a_t·(v_j + e_j) over d floats, j = keys[t], a_t = score[t]·inv, v_j the row
 * v + j·v_t and e_j the row wv + bucket[j]·d (also dq of the backward, Σ ds·(k_j + a^K_ij)):
 * 16 outputs held in registers over all the keys at a time (adding into out in memory key
 * after key makes each key wait for the store of the one before). */
TARGET static void FN(weighted_sum_)(float *restrict out, const float *score, float inv,
                                    const Py_ssize_t *keys, Py_ssize_t n, const float *v,
                                    Py_ssize_t v_t, const float *wv, const int64_t *bucket,
                                    Py_ssize_t d) {
    Py_ssize_t c = 0;
    for (; c + 16 <= d; c += 16) {
        float acc[16] = {0};
        for (Py_ssize_t t = 0; t < n; t++) {
            Py_ssize_t j = keys[t];
            const float *x = v + j * v_t + c, *e = wv + bucket[j] * d + c;
            float a = score[t] * inv;
            for (int l = 0; l < 16; l++) acc[l] += a * (x[l] + e[l]);
        }
        for (int l = 0; l < 16; l++) out[c + l] = acc[l];
    }
    for (; c < d; c++) {
        float acc = 0.0f;
        for (Py_ssize_t t = 0; t < n; t++) {
            Py_ssize_t j = keys[t];
            acc += score[t] * inv * (v[j * v_t + c] + wv[bucket[j] * d + c]);
        }
        out[c] = acc;
    }
}

/* y += a·x over d floats. */
TARGET static void FN(axpy_)(float *restrict y, float a, const float *restrict x, Py_ssize_t d) {
    for (Py_ssize_t c = 0; c < d; c++) y[c] += a * x[c];
}

/* The keys query i of sentence b may attend (real, and j <= i + tk - tq under the causal
 * triangle), into keys[]; returns their number. */
TARGET static Py_ssize_t FN(keys_)(const Relative *P, Py_ssize_t b, Py_ssize_t i,
                                  Py_ssize_t *keys) {
    Py_ssize_t last = P->causal ? i + P->tk - P->tq : P->tk - 1;
    last = last > P->tk - 1 ? P->tk - 1 : last;
    const uint8_t *real = P->real ? P->real + b * P->tk : NULL;
    Py_ssize_t n = 0;
    for (Py_ssize_t j = 0; j <= last; j++)
        if (!real || real[j]) keys[n++] = j;
    return n;
}

/* out = Σ_j p_ij (v_j + a^V_ij) (eq. 3) with logits e_ij = q_i·(k_j + a^K_ij) (eq. 4, q
 * pre-scaled), and lse = the log-sum-exp of the logits, for sentences b0 … b1-1; rows without
 * keys get out = 0 and lse = -inf. */
TARGET static void FN(forward_)(const Relative *P, Py_ssize_t b0, Py_ssize_t b1, float *score,
                               Py_ssize_t *keys) {
    Py_ssize_t d = P->d;
    for (Py_ssize_t b = b0; b < b1; b++)
        for (Py_ssize_t i = 0; i < P->tq; i++) {
            Py_ssize_t n = FN(keys_)(P, b, i, keys);
            const int64_t *bucket = P->buckets + (b * P->tq + i) * P->tk;
            for (Py_ssize_t h = 0; h < P->h; h++) {
                const float *q = AT(P->q, b, h, i), *k = AT(P->k, b, h, 0);
                const float *v = AT(P->v, b, h, 0);
                float *out = AT(P->out, b, h, i);
                float *lse = P->lse + (b * P->h + h) * P->tq + i;
                for (Py_ssize_t c = 0; c < d; c++) out[c] = 0.0f;
                if (n == 0) {
                    *lse = -INFINITY;
                    continue;
                }
                float top = -INFINITY;
                for (Py_ssize_t t = 0; t < n; t++) {
                    Py_ssize_t j = keys[t];
                    score[t] = FN(dot_sum_)(q, k + j * P->k.t, P->wk + bucket[j] * d, d);
                    top = score[t] > top ? score[t] : top;
                }
                float total = 0.0f;
                for (Py_ssize_t t = 0; t < n; t++) {
                    score[t] = EXP(score[t] - top);
                    total += score[t];
                }
                float inv = 1.0f / total;
                FN(weighted_sum_)(out, score, inv, keys, n, v, P->v.t, P->wv, bucket, d);
                *lse = top + logf(total);
            }
        }
}

/* dq (written), dk, dv (added to) and this call's share of dw^K, dw^V (added to the scratch
 * gwk, gwv) from the output gradient dout, for sentences b0 … b1-1: with p = exp(e - lse)
 * and ds = p·(dout·(v_j + a^V_ij) - dout·out): dq = Σ ds·(k_j + a^K_ij), dk += ds·q,
 * dv += p·dout, dw^K[bucket] += ds·q, dw^V[bucket] += p·dout. */
TARGET static void FN(backward_)(const Relative *P, const Grads *G, float *gwk, float *gwv,
                                Py_ssize_t b0, Py_ssize_t b1, float *score, Py_ssize_t *keys) {
    Py_ssize_t d = P->d;
    for (Py_ssize_t b = b0; b < b1; b++)
        for (Py_ssize_t i = 0; i < P->tq; i++) {
            Py_ssize_t n = FN(keys_)(P, b, i, keys);
            const int64_t *bucket = P->buckets + (b * P->tq + i) * P->tk;
            for (Py_ssize_t h = 0; h < P->h; h++) {
                const float *q = AT(P->q, b, h, i), *k = AT(P->k, b, h, 0);
                const float *v = AT(P->v, b, h, 0), *g = AT(G->dout, b, h, i);
                float *gq = AT(G->dq, b, h, i), *gk = AT(G->dk, b, h, 0);
                float *gv = AT(G->dv, b, h, 0);
                for (Py_ssize_t c = 0; c < d; c++) gq[c] = 0.0f;
                float lse = P->lse[(b * P->h + h) * P->tq + i];
                if (n == 0 || lse == -INFINITY) continue;
                for (Py_ssize_t t = 0; t < n; t++) {
                    Py_ssize_t j = keys[t];
                    score[t] = FN(dot_sum_)(q, k + j * P->k.t, P->wk + bucket[j] * d, d) - lse;
                }
                for (Py_ssize_t t = 0; t < n; t++) score[t] = EXP(score[t]);
                const float *out = AT(P->out, b, h, i);
                float g_out = 0.0f;
                for (Py_ssize_t c = 0; c < d; c++) g_out += g[c] * out[c];
                float *ds = score + P->tk, *sum_k = ds + P->tk, *sum_v = sum_k + P->r;
                for (Py_ssize_t t = 0; t < n; t++) {
                    Py_ssize_t j = keys[t];
                    float dp = FN(dot_sum_)(g, v + j * P->v.t, P->wv + bucket[j] * d, d);
                    ds[t] = score[t] * (dp - g_out);
                }
                FN(weighted_sum_)(gq, ds, 1.0f, keys, n, k, P->k.t, P->wk, bucket, d);
                for (Py_ssize_t t = 0; t < n; t++) {
                    Py_ssize_t j = keys[t];
                    FN(axpy_)(gk + j * G->dk.t, ds[t], q, d);
                    FN(axpy_)(gv + j * G->dv.t, score[t], g, d);
                }
                /* q and dout are the same for every key of the row: each bucket's rows of
                 * dw^K and dw^V get (Σ ds)·q and (Σ p)·dout once, not once per key (every
                 * clipped key of a row shares a bucket: a chain of stores to one row) */
                Py_ssize_t lo = bucket[keys[0]], hi = lo; /* any order of buckets */
                for (Py_ssize_t t = 1; t < n; t++) {
                    Py_ssize_t r = bucket[keys[t]];
                    lo = r < lo ? r : lo;
                    hi = r > hi ? r : hi;
                }
                for (Py_ssize_t r = lo; r <= hi; r++) sum_k[r] = sum_v[r] = 0.0f;
                for (Py_ssize_t t = 0; t < n; t++) {
                    Py_ssize_t r = bucket[keys[t]];
                    sum_k[r] += ds[t];
                    sum_v[r] += score[t];
                }
                for (Py_ssize_t r = lo; r <= hi; r++) {
                    FN(axpy_)(gwk + r * d, sum_k[r], q, d);
                    FN(axpy_)(gwv + r * d, sum_v[r], g, d);
                }
            }
        }
}

#undef FN
#undef CAT
#undef CAT_
