/* Gaussian mixture cross-attention after the predictors, fused (Zhang & Feng 2021, eq. 6 and
 * 10-13, variant "approx"), float32, for inference: one pass per row instead of ~25 torch ops.
 *
 * Python wrapper and the conditions it is used under: localnmt/attention/fast/gmm_step.py.
 * The eager path in localnmt/attention/methods/gmm.py is the reference; this file follows its
 * arithmetic operation by operation (same order, same constants), so the two differ only by
 * the rounding of exp/log (a few units in the last place) and, in the AVX builds, of the
 * multiply-adds the compiler fuses.
 *
 * Built by setup.py with -O3 -fno-trapping-math (the clamps below become vector selects, so the
 * eq. 6 loop vectorises; no result changes).
 *
 * Per row r = (b, h, i), with raw predictor outputs x and s = sigmoid(x):
 *   log w_k = log_softmax(x_omega)_k            (eq. 10; -log K without an omega predictor)
 *   mu_k    = J * s_mu_k                        (eq. 11)
 *   sigma_k = max(min(J/2 * s_sigma_k, min(mu_k, J - mu_k)) / 3, sigma_min)   (eq. 12)
 *   c_k     = log w_k - (log sigma_k + log sqrt(2 pi))                        (log w/Z)
 *   beta_j  = sum_k exp(max(c_k - z^2/2, -87)),  z = (j - mu_k) / sigma_k      (eq. 6)
 *   beta_j  = 0 at padded keys
 *   out_j   = lerp(alpha_j, beta_j, g)          (eq. 13; g = sigmoid(x_gate), 0.5 or beta only)
 *
 * fixed_gaussian_step is the hard-coded Gaussian's decoding step (You et al. 2020; Zhang & Feng
 * 2021, Table 2: a fixed Gaussian instead of the dot-product attention): its fixed distribution
 * over the real keys and p @ V in one call, the reference being attention/fixed_gaussian.py.
 *
 * attention_step goes on to the layer's output: alpha from the logits q.k_j over the real keys
 * (the pipeline's softmax), gamma as above, and sum_j gamma_j v_j, one row per (sentence, head),
 * the sentences split among torch's OpenMP team (builds.h). A decoding step of the dense path
 * (logits, softmax, the post stage, gamma @ V) then costs one call instead of about ten ops.
 * Given the predictors' folded weights it also computes the raw outputs x from q
 * (gmm_predict.h) instead of reading them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builds.h"
#include "views.h"
#include "gmm_params.h"
#include "gmm_predict.h"
#include "vec_math.h"
#include "weighted_rows.h"


/* One row of attention_step: out = sum_t gamma_t v_{keys[t]} over the n real keys, with
 * gamma_t = lerp(alpha_t, beta[keys[t]], gate) (beta alone for fusion 2) and alpha the softmax
 * of the logits q.k_j; score[] is scratch of n floats. Instantiated per build. */
#define DEFINE_ATTEND(NAME, EXP, TARGET)                                                        \
    DEFINE_WEIGHTED_ROWS(NAME##_weighted_rows, TARGET)                                          \
                                                                                                \
    DEFINE_DOT(NAME##_dot, TARGET)                                                              \
                                                                                                \
    TARGET static void NAME(const float *restrict q, const float *k, Py_ssize_t k_t,            \
                            const float *v, Py_ssize_t v_t, Py_ssize_t d,                       \
                            const Py_ssize_t *keys, Py_ssize_t n, const float *beta,            \
                            float gate, int fusion, float *restrict score,                      \
                            float *restrict out) {                                              \
        for (Py_ssize_t c = 0; c < d; c++) out[c] = 0.0f;                                       \
        if (n == 0) return; /* no real key: alpha and beta are 0 */                             \
        if (fusion == 2) {  /* Gaussian mixture only (Table 4, "gmm") */                        \
            for (Py_ssize_t t = 0; t < n; t++) score[t] = beta[keys[t]];                        \
        } else {                                                                                \
            float top = -INFINITY;                                                              \
            for (Py_ssize_t t = 0; t < n; t++) {                                                \
                score[t] = NAME##_dot(q, k + keys[t] * k_t, d);                                 \
                top = score[t] > top ? score[t] : top;                                          \
            }                                                                                   \
            for (Py_ssize_t t = 0; t < n; t++) score[t] = EXP(score[t] - top);                  \
            float total = 0.0f;                                                                 \
            for (Py_ssize_t t = 0; t < n; t++) total += score[t];                               \
            for (Py_ssize_t t = 0; t < n; t++)                                                  \
                score[t] = lerp(score[t] / total, beta[keys[t]], gate);                         \
        }                                                                                       \
        NAME##_weighted_rows(v, v_t, d, keys, n, score, out);                                   \
    }

/* The hard-coded Gaussian's weights of one row: p_t over the n real keys keys[t] (positions
 * pos[keys[t]]) of logits (j - mu)^2 * factor (square, then the factor: the torch path's
 * order), their softmax; the logits and exps of all tk keys go through e[] (scratch of tk
 * floats) so that the loops vectorise. Then sum_t p_t v_{keys[t]} for one head. Instantiated
 * per build. */
#define DEFINE_FIXED(NAME, EXP, TARGET)                                                         \
    TARGET static void NAME##_weights(const float *restrict pos, const Py_ssize_t *keys,        \
                                      Py_ssize_t n, Py_ssize_t tk, float mu, float factor,      \
                                      float *restrict e, float *restrict p) {                   \
        for (Py_ssize_t j = 0; j < tk; j++) {                                                   \
            float dist = pos[j] - mu;                                                           \
            e[j] = dist * dist * factor;                                                        \
        }                                                                                       \
        float top = -INFINITY, total = 0.0f;                                                    \
        for (Py_ssize_t t = 0; t < n; t++) top = e[keys[t]] > top ? e[keys[t]] : top;           \
        for (Py_ssize_t j = 0; j < tk; j++) e[j] = EXP(e[j] - top);                             \
        for (Py_ssize_t t = 0; t < n; t++) {                                                    \
            p[t] = e[keys[t]];                                                                  \
            total += p[t];                                                                      \
        }                                                                                       \
        for (Py_ssize_t t = 0; t < n; t++) p[t] /= total;                                       \
    }                                                                                           \
                                                                                                \
    DEFINE_WEIGHTED_ROWS(NAME##_sum, TARGET)

typedef void (*FixedWeightsFn)(const float *, const Py_ssize_t *, Py_ssize_t, Py_ssize_t, float,
                               float, float *, float *);
typedef void (*FixedSumFn)(const float *, Py_ssize_t, Py_ssize_t, const Py_ssize_t *, Py_ssize_t,
                           const float *, float *);

typedef void (*AttendFn)(const float *, const float *, Py_ssize_t, const float *, Py_ssize_t,
                         Py_ssize_t, const Py_ssize_t *, Py_ssize_t, const float *, float, int,
                         float *, float *);

typedef void (*MixtureFn)(const float *, int, int, const float *, const float *, const float *,
                          float *);

typedef void (*PredictFn)(const float *const *, int, Py_ssize_t, const float *, const float *,
                          Py_ssize_t, const float *, const float *, Py_ssize_t, float *, float *);

/* The predictors' folded weights (gmm_predict.h); w1t NULL: the raw outputs are given. */
typedef struct {
    const float *w1t, *b1, *w2, *b2;
    Py_ssize_t nd;
} Predictors;

typedef void (*ParamsFn)(const float *, Py_ssize_t, const float *, Py_ssize_t, int,
                         const Layout *, float *, float *, float *, float *);

DEFINE_PER_BUILD(DEFINE_MIXTURE, mixture)
DEFINE_PER_BUILD(DEFINE_PARAMS, params)
DEFINE_PER_BUILD(DEFINE_ATTEND, attend)
DEFINE_PER_BUILD(DEFINE_PREDICT, predict)
DEFINE_PER_BUILD(DEFINE_FIXED, fixed)
static const FixedWeightsFn fixed_weights[N_BUILDS] = BUILD_TABLE(fixed, _weights);
static const FixedSumFn fixed_sums[N_BUILDS] = BUILD_TABLE(fixed, _sum);
static const AttendFn attends[N_BUILDS] = BUILD_TABLE(attend, );
static const PredictFn predicts[N_BUILDS] = BUILD_TABLE(predict, );
static const MixtureFn mixtures[N_BUILDS] = BUILD_TABLE(mixture, );
static const ParamsFn params[N_BUILDS] = BUILD_TABLE(params, _forward);

static PyObject *mixture_post(PyObject *self, PyObject *args) {
    unsigned long long out_p, raw_p, probs_p, pos_p, length_p, real_p; /* "K": addresses */
    Py_ssize_t batch, rows_per_batch, tk, raw_stride;
    Layout L;
    if (!PyArg_ParseTuple(args, "KKKKKKnnnniiiiiiiiff", &out_p, &raw_p, &probs_p, &pos_p,
                          &length_p, &real_p, &batch, &rows_per_batch, &tk, &raw_stride, &L.k,
                          &L.mu_col, &L.mu_n, &L.sigma_col, &L.sigma_n, &L.omega_col,
                          &L.gate_col, &L.fusion, &L.sigma_min, &L.fixed_gate))
        return NULL;
    if (L.k < 1 || L.k > MAX_K) {
        PyErr_Format(PyExc_ValueError, "mixture_post: k=%d outside 1-%d", L.k, MAX_K);
        return NULL;
    }
    float *out = (float *)out_p;
    const float *raw = (const float *)raw_p, *probs = (const float *)probs_p;
    const float *pos = (const float *)pos_p, *length = (const float *)length_p;
    const uint8_t *real = (const uint8_t *)real_p;
    float *acc = (float *)malloc(sizeof(float) * (size_t)(tk > 0 ? tk : 1));
    if (acc == NULL) return PyErr_NoMemory();
    /* the parameters of up to PARAMS_ROWS rows at a time (one sentence's), then their rows */
    float *c = (float *)malloc(sizeof(float) * 3 * PARAMS_ROWS * MAX_K);
    if (c == NULL) {
        free(acc);
        return PyErr_NoMemory();
    }
    float *mu = c + PARAMS_ROWS * MAX_K, *sigma = mu + PARAMS_ROWS * MAX_K, gate[PARAMS_ROWS];
    for (Py_ssize_t b = 0; b < batch; b++) {
        const float *pos_b = pos + b * tk;
        const uint8_t *real_b = real ? real + b * tk : NULL;
        for (Py_ssize_t first = 0; first < rows_per_batch; first += PARAMS_ROWS) {
            Py_ssize_t left = rows_per_batch - first;
            int n = left < PARAMS_ROWS ? (int)left : PARAMS_ROWS;
            Py_ssize_t row0 = b * rows_per_batch + first;
            params[build_current](raw + row0 * raw_stride, raw_stride, length + b, 0, n, &L, c,
                                  mu, sigma, gate);
            for (int r = 0; r < n; r++) {
                int at = r * L.k;
                mixtures[build_current](pos_b, (int)tk, L.k, c + at, mu + at, sigma + at, acc);
                if (real_b)
                    for (Py_ssize_t j = 0; j < tk; j++) acc[j] = real_b[j] ? acc[j] : 0.0f;
                const float *alpha = probs + (row0 + r) * tk;
                float *o = out + (row0 + r) * tk;
                if (L.fusion == 2) /* Gaussian mixture only (Table 4, "gmm") */
                    for (Py_ssize_t j = 0; j < tk; j++) o[j] = acc[j];
                else
                    for (Py_ssize_t j = 0; j < tk; j++) o[j] = lerp(alpha[j], acc[j], gate[r]);
            }
        }
    }
    free(c);
    free(acc);
    Py_RETURN_NONE;
}

/* The indices of the real keys of one sentence (real: tk bytes, or NULL: all real) into keys;
 * how many. */
static Py_ssize_t real_keys(const uint8_t *real, Py_ssize_t tk, Py_ssize_t *keys) {
    Py_ssize_t n = 0;
    for (Py_ssize_t j = 0; j < tk; j++)
        if (!real || real[j]) keys[n++] = j;
    return n;
}

/* Sentences lo … hi-1 of attention_step on this thread; 0 where its scratch could not be had. */
static int attend_sentences(const View *Q, const View *K, const View *V, const View *O,
                            const float *raw, const float *pos, const float *length,
                            const uint8_t *real, Py_ssize_t heads, Py_ssize_t tk, Py_ssize_t d,
                            Py_ssize_t key_group, Py_ssize_t raw_stride, const Layout *L,
                            const Predictors *P, Py_ssize_t lo, Py_ssize_t hi) {
    float *acc = (float *)malloc(sizeof(float) * (size_t)(2 * tk + 1));
    Py_ssize_t *keys = (Py_ssize_t *)malloc(sizeof(Py_ssize_t) * (size_t)(tk + 1));
    float *c = (float *)malloc(sizeof(float) * 3 * PARAMS_ROWS * MAX_K);
    /* with the predictors: one sentence's raw outputs (heads rows) and the hidden layer */
    float *own_raw = NULL;
    if (P->w1t != NULL)
        own_raw = (float *)malloc(sizeof(float) * (size_t)(heads * raw_stride + PRED_ROWS * P->nd));
    if (acc == NULL || keys == NULL || c == NULL || (P->w1t != NULL && own_raw == NULL)) {
        free(acc);
        free(keys);
        free(c);
        free(own_raw);
        return 0;
    }
    float *score = acc + tk, *mu = c + PARAMS_ROWS * MAX_K, *sigma = mu + PARAMS_ROWS * MAX_K;
    float gate[PARAMS_ROWS];
    for (Py_ssize_t b = lo; b < hi; b++) {
        const float *pos_b = pos + b * tk;
        Py_ssize_t n = real_keys(real ? real + b * tk : NULL, tk, keys);
        Py_ssize_t kb = b / key_group;
        const float *raw_b = own_raw;
        if (own_raw == NULL) {
            raw_b = raw + b * heads * raw_stride;
        } else { /* eq. 7-9 and 14 from the queries, PRED_ROWS heads at a time */
            float *hidden = own_raw + heads * raw_stride;
            for (Py_ssize_t first = 0; first < heads; first += PRED_ROWS) {
                const float *x[PRED_ROWS];
                int rows = heads - first < PRED_ROWS ? (int)(heads - first) : PRED_ROWS;
                for (int r = 0; r < rows; r++) x[r] = AT(*Q, b, first + r, 0);
                predicts[build_current](x, rows, d, P->w1t, P->b1, P->nd, P->w2, P->b2,
                                        raw_stride, hidden, own_raw + first * raw_stride);
            }
        }
        for (Py_ssize_t first = 0; first < heads; first += PARAMS_ROWS) {
            Py_ssize_t left = heads - first;
            int rows = left < PARAMS_ROWS ? (int)left : PARAMS_ROWS;
            params[build_current](raw_b + first * raw_stride, raw_stride, length + b, 0, rows, L,
                                  c, mu, sigma, gate);
            for (int r = 0; r < rows; r++) {
                Py_ssize_t h = first + r;
                int at = r * L->k;
                mixtures[build_current](pos_b, (int)tk, L->k, c + at, mu + at, sigma + at, acc);
                attends[build_current](AT(*Q, b, h, 0), AT(*K, kb, h, 0), K->t, AT(*V, kb, h, 0),
                                       V->t, d, keys, n, acc, gate[r], L->fusion, score,
                                       AT(*O, b, h, 0));
            }
        }
    }
    free(acc);
    free(keys);
    free(c);
    free(own_raw);
    return 1;
}

/* attention_step(out, q, k, v, raw, pos, length, real, heads, tk, d, key_group, raw_stride,
 *                <layout>, w1t, b1, w2, b2, nd, b0, b1, unused): one decoding step of GMM
 * cross-attention for sentences b0 … b1-1, from the pre-scaled queries q (B, H, 1, d), the keys
 * and values k, v (B / key_group, H, Tk, d) (beam search's shared source: sentence b reads row
 * b / key_group) and the raw predictor outputs (B·H rows of raw_stride floats) into out (B, H,
 * 1, d); each of out, q, k, v a view tuple (address, stride b, stride h, stride t). With w1t
 * (address, else 0) the raw outputs are computed from q with the predictors' folded weights
 * (gmm_predict.h: w1t (d, nd), b1 (nd), w2 (raw_stride, nd), b2 (raw_stride)) and raw is not
 * read. */
static PyObject *attention_step(PyObject *self, PyObject *args) {
    PyObject *out_v, *q_v, *k_v, *v_v, *unused;
    unsigned long long raw_p, pos_p, length_p, real_p, w1t_p, pb1_p, w2_p, pb2_p;
    Py_ssize_t heads, tk, d, key_group, raw_stride, nd, b0, b1;
    Layout L;
    if (!PyArg_ParseTuple(args, "OOOOKKKKnnnnniiiiiiiiffKKKKnnnO", &out_v, &q_v, &k_v, &v_v,
                          &raw_p, &pos_p, &length_p, &real_p, &heads, &tk, &d, &key_group,
                          &raw_stride, &L.k, &L.mu_col, &L.mu_n, &L.sigma_col, &L.sigma_n,
                          &L.omega_col, &L.gate_col, &L.fusion, &L.sigma_min, &L.fixed_gate,
                          &w1t_p, &pb1_p, &w2_p, &pb2_p, &nd, &b0, &b1, &unused))
        return NULL;
    Predictors P = {(const float *)w1t_p, (const float *)pb1_p, (const float *)w2_p,
                    (const float *)pb2_p, nd};
    if (P.w1t != NULL && (nd < 1 || P.b1 == NULL || P.w2 == NULL || P.b2 == NULL)) {
        PyErr_Format(PyExc_ValueError, "attention_step: predictors with nd=%zd", nd);
        return NULL;
    }
    View O, Q, K, V;
    if (!parse_view(out_v, &O) || !parse_view(q_v, &Q) || !parse_view(k_v, &K) ||
        !parse_view(v_v, &V))
        return NULL;
    if (L.k < 1 || L.k > MAX_K || heads < 1 || tk < 1 || d < 1 || key_group < 1) {
        PyErr_Format(PyExc_ValueError,
                     "attention_step: k=%d (1-%d), H=%zd, Tk=%zd, d=%zd, key_group=%zd", L.k,
                     MAX_K, heads, tk, d, key_group);
        return NULL;
    }
    const float *raw = (const float *)raw_p, *pos = (const float *)pos_p;
    const float *length = (const float *)length_p;
    const uint8_t *real = (const uint8_t *)real_p;
    RETURN_TEAM_SHARES(b0, b1, attend_sentences(&Q, &K, &V, &O, raw, pos, length, real, heads,
                                                tk, d, key_group, raw_stride, &L, &P, lo, hi));
}

/* Sentences lo … hi-1 of fixed_gaussian_step on this thread; 0 where its scratch could not be
 * had. Per row (b, i): mu = min(ratio * i, max(J - 1, 0)), logits -(j - mu)^2 / (2 sigma^2)
 * over the real keys (square, then the factor: the torch path's order), their softmax p (every
 * key alike where none is real, as the torch path's all-masked row), and per head
 * out = sum_t p_t v_t: the same p serves every head. */
static int fixed_sentences(const View *V, const View *O, const float *kpos, const float *qpos,
                           const float *length, const uint8_t *real, Py_ssize_t heads,
                           Py_ssize_t tq, Py_ssize_t tk, Py_ssize_t d, Py_ssize_t key_group,
                           float ratio, float factor, Py_ssize_t lo, Py_ssize_t hi) {
    float *p = (float *)malloc(sizeof(float) * (size_t)(2 * tk));
    Py_ssize_t *keys = (Py_ssize_t *)malloc(sizeof(Py_ssize_t) * (size_t)tk);
    if (p == NULL || keys == NULL) {
        free(p);
        free(keys);
        return 0;
    }
    float *e = p + tk;
    for (Py_ssize_t b = lo; b < hi; b++) {
        Py_ssize_t n = real_keys(real ? real + b * tk : NULL, tk, keys);
        Py_ssize_t used = n;
        if (n == 0) { /* no real key: every key at the same (masked) logit, as in torch */
            used = tk;
            for (Py_ssize_t t = 0; t < tk; t++) {
                keys[t] = t;
                p[t] = 1.0f / (float)tk;
            }
        }
        Py_ssize_t kb = b / key_group;
        for (Py_ssize_t i = 0; i < tq; i++) {
            if (n > 0) {
                float last = length[b * tq + i] - 1.0f;
                last = last < 0.0f ? 0.0f : last;
                float diagonal = qpos[b * tq + i];
                if (ratio != 1.0f) diagonal = ratio * diagonal;
                float mu = diagonal < last ? diagonal : last;
                fixed_weights[build_current](kpos + b * tk, keys, n, tk, mu, factor, e, p);
            }
            for (Py_ssize_t h = 0; h < heads; h++)
                fixed_sums[build_current](AT(*V, kb, h, 0), V->t, d, keys, used, p,
                                          AT(*O, b, h, i));
        }
    }
    free(p);
    free(keys);
    return 1;
}

/* fixed_gaussian_step(out, v, kpos, qpos, length, real, heads, tq, tk, d, key_group, ratio,
 * factor, b0, b1, unused): p @ V of the hard-coded Gaussian (You et al. 2020) for sentences
 * b0 … b1-1, from the values v (B / key_group, H, Tk, d), the key positions j (B, Tk), the
 * query positions i and real lengths J (B, Tq), the real keys (B, Tk) bytes or 0 (all real),
 * ratio and factor = -1 / (2 sigma^2), into out (B, H, Tq, d); out and v view tuples. */
static PyObject *fixed_gaussian_step(PyObject *self, PyObject *args) {
    PyObject *out_v, *v_v, *unused;
    unsigned long long kpos_p, qpos_p, length_p, real_p;
    Py_ssize_t heads, tq, tk, d, key_group, b0, b1;
    float ratio, factor;
    if (!PyArg_ParseTuple(args, "OOKKKKnnnnnffnnO", &out_v, &v_v, &kpos_p, &qpos_p, &length_p,
                          &real_p, &heads, &tq, &tk, &d, &key_group, &ratio, &factor, &b0, &b1,
                          &unused))
        return NULL;
    View O, V;
    if (!parse_view(out_v, &O) || !parse_view(v_v, &V)) return NULL;
    if (heads < 1 || tq < 1 || tk < 1 || d < 1 || key_group < 1) {
        PyErr_Format(PyExc_ValueError,
                     "fixed_gaussian_step: H=%zd, Tq=%zd, Tk=%zd, d=%zd, key_group=%zd", heads,
                     tq, tk, d, key_group);
        return NULL;
    }
    const float *kpos = (const float *)kpos_p, *qpos = (const float *)qpos_p;
    const float *length = (const float *)length_p;
    const uint8_t *real = (const uint8_t *)real_p;
    RETURN_TEAM_SHARES(b0, b1, fixed_sentences(&V, &O, kpos, qpos, length, real, heads, tq, tk,
                                               d, key_group, ratio, factor, lo, hi));
}

/* one_term(out, pos, tk, c, mu, sigma): exp(max(c - z^2/2, -87)) over tk keys, the eq. 6 loop
 * of the build in use with one component (for tests of the exp approximation). */
static PyObject *one_term(PyObject *self, PyObject *args) {
    unsigned long long out_p, pos_p;
    Py_ssize_t tk;
    float c, mu, sigma;
    if (!PyArg_ParseTuple(args, "KKnfff", &out_p, &pos_p, &tk, &c, &mu, &sigma)) return NULL;
    mixtures[build_current]((const float *)pos_p, (int)tk, 1, &c, &mu, &sigma, (float *)out_p);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"mixture_post", mixture_post, METH_VARARGS,
     "Fused eq. 6 and 10-13 over float32 buffers given by address (see gmm_step.py)."},
    {"attention_step", attention_step, METH_VARARGS,
     "One decoding step of GMM cross-attention to its output (see gmm_step.py)."},
    {"fixed_gaussian_step", fixed_gaussian_step, METH_VARARGS,
     "p @ V of the hard-coded Gaussian's decoding step (see gmm_step.py)."},
    {"one_term", one_term, METH_VARARGS, "The eq. 6 loop with one component (tests)."},
    BUILD_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gmm_step", NULL, -1, methods};

PyMODINIT_FUNC PyInit__gmm_step(void) {
    detect_builds();
    return PyModule_Create(&module);
}
