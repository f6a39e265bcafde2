/* Band attention forward and backward, one build: included by band.c once per build with
 * SUFFIX (name suffix), TARGET (function attribute, may be empty) and EXP (an exp of
 * vec_math.h) defined. See band.c for the problem and the layout of the buffers. */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SUFFIX)

/* a·b over d floats: 16 independent lanes (one AVX-512 register, two AVX2, four SSE), summed
 * in a fixed order at the end. */
TARGET static float FN(dot_)(const float *restrict a, const float *restrict b, Py_ssize_t d) {
    float lane[16] = {0};
    Py_ssize_t c = 0;
    for (; c + 16 <= d; c += 16)
        for (int l = 0; l < 16; l++) lane[l] += a[c + l] * b[c + l];
    float s = 0.0f;
    for (int l = 0; l < 16; l++) s += lane[l];
    for (; c < d; c++) s += a[c] * b[c];
    return s;
}

/* y += a·x over d floats. */
TARGET static void FN(axpy_)(float *restrict y, float a, const float *restrict x, Py_ssize_t d) {
    for (Py_ssize_t c = 0; c < d; c++) y[c] += a * x[c];
}

/* out = Σ_t p_t·v_t over the window's rows (weighted_rows.h). */
DEFINE_WEIGHTED_ROWS(FN(weighted_rows_), TARGET)

/* keys of query i of head h in sentence b: offsets (into the (B·H·T) rows of k and v) of the
 * real keys j with -left <= j - i <= right in every group's head; returns their number. */
TARGET static int FN(window_)(const Band *P, Py_ssize_t b, Py_ssize_t h, Py_ssize_t i,
                             Py_ssize_t *rows) {
    Py_ssize_t lo = i - P->left[h], hi = i + P->right[h];
    lo = lo < 0 ? 0 : lo;
    hi = hi > P->t - 1 ? P->t - 1 : hi;
    const uint8_t *real = P->real ? P->real + b * P->t : NULL;
    int n = 0;
    for (int g = 0; g < P->groups; g++) {
        Py_ssize_t head = P->area < 0 ? h : ((h + g - P->area) % P->h + P->h) % P->h;
        Py_ssize_t base = (b * P->h + head) * P->t;
        for (Py_ssize_t j = lo; j <= hi; j++)
            if (!real || real[j]) rows[n++] = base + j;
    }
    return n;
}

/* out = softmax(q·kᵀ over the window)·v and lse = its log-sum-exp, for sentences b0 … b1-1;
 * rows without keys get out = 0 and lse = -inf. */
TARGET static void FN(forward_)(const Band *P, Py_ssize_t b0, Py_ssize_t b1, float *score,
                               Py_ssize_t *rows) {
    Py_ssize_t d = P->d;
    for (Py_ssize_t b = b0; b < b1; b++)
        for (Py_ssize_t h = 0; h < P->h; h++)
            for (Py_ssize_t i = 0; i < P->t; i++) {
                Py_ssize_t row = (b * P->h + h) * P->t + i;
                const float *q = P->q + row * d;
                float *out = P->out + row * d;
                for (Py_ssize_t c = 0; c < d; c++) out[c] = 0.0f;
                int n = FN(window_)(P, b, h, i, rows);
                if (n == 0) {
                    P->lse[row] = -INFINITY;
                    continue;
                }
                float top = -INFINITY;
                for (int t = 0; t < n; t++) {
                    score[t] = FN(dot_)(q, P->k + rows[t] * d, d);
                    top = score[t] > top ? score[t] : top;
                }
                float total = 0.0f;
                for (int t = 0; t < n; t++) {
                    score[t] = EXP(score[t] - top);
                    total += score[t];
                }
                for (int t = 0; t < n; t++) score[t] /= total;
                FN(weighted_rows_)(P->v, d, d, rows, n, score, out);
                P->lse[row] = top + logf(total);
            }
}

/* dq (written), dk and dv (added to) from the output gradient dout, for sentences b0 … b1-1:
 * with p = exp(q·k - lse) and ds = p·(dout·v - dout·out): dq = Σ ds·k, dk += ds·q,
 * dv += p·dout. Sentences write only their own rows of dk and dv. */
TARGET static void FN(backward_)(const Band *P, const float *dout, float *dq, float *dk,
                                float *dv, Py_ssize_t b0, Py_ssize_t b1, float *score,
                                Py_ssize_t *rows) {
    Py_ssize_t d = P->d;
    for (Py_ssize_t b = b0; b < b1; b++)
        for (Py_ssize_t h = 0; h < P->h; h++)
            for (Py_ssize_t i = 0; i < P->t; i++) {
                Py_ssize_t row = (b * P->h + h) * P->t + i;
                const float *q = P->q + row * d, *g = dout + row * d;
                float *gq = dq + row * d;
                for (Py_ssize_t c = 0; c < d; c++) gq[c] = 0.0f;
                float lse = P->lse[row];
                if (lse == -INFINITY) continue;
                int n = FN(window_)(P, b, h, i, rows);
                for (int t = 0; t < n; t++) score[t] = FN(dot_)(q, P->k + rows[t] * d, d) - lse;
                for (int t = 0; t < n; t++) score[t] = EXP(score[t]);
                float g_out = FN(dot_)(g, P->out + row * d, d);
                float *ds = score + n;
                for (int t = 0; t < n; t++)
                    ds[t] = score[t] * (FN(dot_)(g, P->v + rows[t] * d, d) - g_out);
                FN(weighted_rows_)(P->k, d, d, rows, n, ds, gq);
                for (int t = 0; t < n; t++) {
                    FN(axpy_)(dk + rows[t] * d, ds[t], q, d);
                    FN(axpy_)(dv + rows[t] * d, score[t], g, d);
                }
            }
}

#undef FN
#undef CAT
#undef CAT_
