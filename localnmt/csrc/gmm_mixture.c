/* Gaussian mixture attention fused with dot-product attention, forward and backward, float32
 * (Zhang & Feng 2021, eq. 6 and 13), for training and full-sequence forwards: one pass over
 * each row's K x Tk mixture terms instead of a dozen torch ops over (B, H, Tq, K, Tk)
 * temporaries, and no such temporary at all.
 *
 * Python wrapper and the conditions it is used under: localnmt/attention/fast/gmm_mixture.py.
 * The torch ops of localnmt/attention/methods/gmm.py (mixture_attention, then torch.lerp) are
 * the reference; this file follows their arithmetic, so the two differ by the rounding of exp
 * and, in the AVX builds, of the multiply-adds the compiler fuses.
 *
 * Per row r = (b, h, i) with K components (c_k = log w_k - log Z_k, mu_k, sigma_k) and keys j
 * at positions p_j:
 *   z_kj  = (p_j - mu_k) / sigma_k,   t_kj = exp(max(c_k - z_kj^2 / 2, -87))
 *   beta_j = sum_k t_kj at real keys, 0 at padded ones                          (eq. 6)
 *   out_j  = lerp(alpha_j, beta_j, g)   with alpha: the fused attention gamma  (eq. 13)
 *   out_j  = g beta_j                   without alpha: gamma's part beyond (1 - g) alpha
 * with g a gate per row (mode 0) or one number (mode 1; 1: the Gaussian mixture only).
 * Backward, with d_j the incoming gradient, m_j = d_j at real keys and 0 at padded ones, and
 * S_k = sum_j m_j t_kj, S'_k = sum_j m_j t_kj z_kj, S''_k = sum_j m_j t_kj z_kj^2:
 *   dc_k = g S_k,   dmu_k = g S'_k / sigma_k,   dsigma_k = g S''_k / sigma_k
 *   dg = sum_k S_k (- sum_j d_j alpha_j),   dalpha_j = (1 - g) d_j   (torch.lerp's backward)
 *
 * Buffers (contiguous, addresses passed as integers): c, mu, sigma (rows, K); pos (B, Tk);
 * real (B, Tk) uint8 or 0 for no padding; alpha, out (rows, Tk); gate (rows,). Rows are
 * (B, rows_per_batch) in order. A call covers sentences b0 ... b1-1 with the GIL released, so
 * the wrapper runs sentence ranges on several threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builds.h"
#include "gmm_bank_head.h"
#include "gmm_params.h"
#include "vec_math.h"

#define LANES 16
_Static_assert(LANES == 16, "sum_lanes (vec_math.h) sums 16 lanes");

typedef struct {
    const float *c, *mu, *sigma, *pos, *alpha, *gate;
    const uint8_t *real;
    float *out;
    Py_ssize_t rows_per_batch, tk;
    int k, mode; /* mode 0: a gate per row; 1: fixed_gate */
    float fixed_gate;
} Mixture;

typedef struct {
    const float *grad;
    float *dc, *dmu, *dsigma, *dalpha, *dgate; /* dalpha, dgate: NULL when not wanted */
} MixtureGrads;

static inline float row_gate(const Mixture *M, Py_ssize_t row) {
    return M->mode == 0 ? M->gate[row] : M->fixed_gate;
}

/* Forward and backward of one build, over sentences b0 ... b1-1. */
#define DEFINE_BUILD(SUFFIX, EXP, TARGET)                                                      \
    TARGET static void forward##SUFFIX(const Mixture *M, Py_ssize_t b0, Py_ssize_t b1) {       \
        Py_ssize_t tk = M->tk;                                                                 \
        for (Py_ssize_t b = b0; b < b1; b++) {                                                 \
            const float *restrict pos = M->pos + b * tk;                                       \
            const uint8_t *real = M->real ? M->real + b * tk : NULL;                           \
            for (Py_ssize_t r = 0; r < M->rows_per_batch; r++) {                               \
                Py_ssize_t row = b * M->rows_per_batch + r;                                    \
                float *restrict acc = M->out + row * tk;                                       \
                Py_ssize_t at = row * M->k;                                                    \
                mixture##SUFFIX(pos, (int)tk, M->k, M->c + at, M->mu + at, M->sigma + at, acc); \
                if (real)                                                                      \
                    for (Py_ssize_t j = 0; j < tk; j++) acc[j] = real[j] ? acc[j] : 0.0f;      \
                float g = row_gate(M, row);                                                    \
                if (M->alpha) {                                                                \
                    const float *alpha = M->alpha + row * tk;                                  \
                    for (Py_ssize_t j = 0; j < tk; j++) acc[j] = lerp(alpha[j], acc[j], g);    \
                } else if (g != 1.0f) {                                                        \
                    for (Py_ssize_t j = 0; j < tk; j++) acc[j] *= g;                           \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
                                                                                               \
    TARGET static void backward##SUFFIX(const Mixture *M, const MixtureGrads *G, Py_ssize_t b0, \
                                        Py_ssize_t b1, float *restrict masked) {                \
        Py_ssize_t tk = M->tk, padded = (tk + LANES - 1) / LANES * LANES;                       \
        float *restrict at_pos = masked + padded; /* the sentence's positions, padded */        \
        for (Py_ssize_t b = b0; b < b1; b++) {                                                  \
            const float *restrict pos = M->pos + b * tk;                                        \
            const uint8_t *real = M->real ? M->real + b * tk : NULL;                            \
            for (Py_ssize_t j = 0; j < padded; j++) at_pos[j] = j < tk ? pos[j] : pos[0];       \
            for (Py_ssize_t r = 0; r < M->rows_per_batch; r++) {                                \
                Py_ssize_t row = b * M->rows_per_batch + r;                                     \
                const float *restrict d = G->grad + row * tk;                                   \
                for (Py_ssize_t j = 0; j < tk; j++) masked[j] = real && !real[j] ? 0.0f : d[j]; \
                for (Py_ssize_t j = tk; j < padded; j++) masked[j] = 0.0f;                      \
                float g = row_gate(M, row), total = 0.0f;                                       \
                for (int i = 0; i < M->k; i++) {                                                \
                    Py_ssize_t at = row * M->k + i;                                             \
                    float ci = M->c[at], mi = M->mu[at], si = M->sigma[at];                     \
                    float s0[LANES] = {0}, s1[LANES] = {0}, s2[LANES] = {0};                    \
                    for (Py_ssize_t j = 0; j < padded; j += LANES)                              \
                        for (int l = 0; l < LANES; l++) {                                       \
                            float p = at_pos[j + l], z = (p - mi) / si;                         \
                            float w = masked[j + l] * EXP(term_exponent(p, ci, mi, si));        \
                            s0[l] += w;                                                         \
                            s1[l] += w * z;                                                     \
                            s2[l] += (w * z) * z;                                               \
                        }                                                                       \
                    float sum0 = sum_lanes(s0), sum1 = sum_lanes(s1), sum2 = sum_lanes(s2);     \
                    G->dc[at] = g * sum0;                                                       \
                    G->dmu[at] = g * sum1 / si;                                                 \
                    G->dsigma[at] = g * sum2 / si;                                              \
                    total += sum0;                                                              \
                }                                                                               \
                if (!M->alpha) {                                                               \
                    if (G->dgate) G->dgate[row] = total;                                       \
                    continue;                                                                  \
                }                                                                              \
                const float *alpha = M->alpha + row * tk;                                      \
                if (G->dalpha) {                                                               \
                    float *restrict da = G->dalpha + row * tk;                                 \
                    for (Py_ssize_t j = 0; j < tk; j++) da[j] = d[j] * (1.0f - g);             \
                }                                                                              \
                if (G->dgate) {                                                                \
                    float lanes[LANES] = {0}, dot = 0.0f;                                      \
                    Py_ssize_t j = 0;                                                          \
                    for (; j + LANES <= tk; j += LANES)                                        \
                        for (int l = 0; l < LANES; l++) lanes[l] += d[j + l] * alpha[j + l];   \
                    for (int l = 0; l < LANES; l++) dot += lanes[l];                           \
                    for (; j < tk; j++) dot += d[j] * alpha[j];                                \
                    G->dgate[row] = total - dot;                                               \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

typedef void (*ForwardFn)(const Mixture *, Py_ssize_t, Py_ssize_t);
typedef void (*BackwardFn)(const Mixture *, const MixtureGrads *, Py_ssize_t, Py_ssize_t,
                           float *);

typedef void (*ParamsForwardFn)(const float *, Py_ssize_t, const float *, Py_ssize_t, int,
                                const Layout *, float *, float *, float *, float *);
typedef void (*ParamsBackwardFn)(const float *, Py_ssize_t, const float *, Py_ssize_t, int,
                                 const Layout *, const float *, const float *, const float *,
                                 const float *, float *, int);

typedef void (*HeadForwardFn)(const BankHead *, float *, float *, Py_ssize_t, Py_ssize_t);
typedef void (*HeadBackwardFn)(const BankHead *, const float *, const float *, float *, float *,
                               float *, Py_ssize_t, Py_ssize_t);

DEFINE_PER_BUILD(DEFINE_BANK_HEAD, head)
static const HeadForwardFn head_forwards[N_BUILDS] = BUILD_TABLE(head, _forward);
static const HeadBackwardFn head_backwards[N_BUILDS] = BUILD_TABLE(head, _backward);
DEFINE_PER_BUILD(DEFINE_PARAMS, params)
static const ParamsForwardFn params_forwards[N_BUILDS] = BUILD_TABLE(params, _forward);
static const ParamsBackwardFn params_backwards[N_BUILDS] = BUILD_TABLE(params, _backward);
DEFINE_PER_BUILD(DEFINE_MIXTURE, mixture)
DEFINE_PER_BUILD(DEFINE_BUILD, )
static const ForwardFn forwards[N_BUILDS] = BUILD_TABLE(forward, );
static const BackwardFn backwards[N_BUILDS] = BUILD_TABLE(backward, );

/* Forward (backward = 0) or backward of sentences b0 ... b1-1, with the GIL released. */
static PyObject *run_mixture(PyObject *args, int backward) {
    unsigned long long out, c, mu, sigma, pos, real, alpha, gate; /* "K": addresses */
    unsigned long long g[6]; /* backward: grad, dc, dmu, dsigma, dalpha, dgate */
    Mixture M;
    Py_ssize_t b0, b1;
    if (!PyArg_ParseTuple(args, "KKKKKKKKnniifnn(KKKKKK)", &out, &c, &mu, &sigma, &pos, &real,
                          &alpha, &gate, &M.rows_per_batch, &M.tk, &M.k, &M.mode,
                          &M.fixed_gate, &b0, &b1, &g[0], &g[1], &g[2], &g[3], &g[4], &g[5]))
        return NULL;
    if (M.k < 1 || M.tk < 0 || M.rows_per_batch < 0 || M.mode < 0 || M.mode > 1 ||
        (M.mode == 0 && gate == 0) || (backward && (g[0] == 0 || g[1] == 0 || g[2] == 0 ||
                                                    g[3] == 0 || (g[4] != 0 && alpha == 0)))) {
        PyErr_Format(PyExc_ValueError,
                     "gmm_mixture: K=%d must be >= 1, mode=%d 0 (with a gate) or 1; backward "
                     "needs grad, dc, dmu and dsigma, and dalpha alpha",
                     M.k, M.mode);
        return NULL;
    }
    M.out = (float *)out;
    M.c = (const float *)c;
    M.mu = (const float *)mu;
    M.sigma = (const float *)sigma;
    M.pos = (const float *)pos;
    M.real = (const uint8_t *)real;
    M.alpha = (const float *)alpha;
    M.gate = (const float *)gate;
    MixtureGrads G = {(const float *)g[0], (float *)g[1], (float *)g[2],
                      (float *)g[3], (float *)g[4], (float *)g[5]};
    /* backward: per thread a row of masked gradients and the positions */
    TeamScratch masked = {NULL, NULL, 0};
    size_t row_floats = 2 * (size_t)((M.tk + LANES - 1) / LANES * LANES + LANES);
    if (backward && !team_scratch(&masked, (size_t)team_most(), sizeof(float) * row_floats, 0))
        return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    TEAM_PARALLEL(b1 - b0 > 1) {
        Py_ssize_t lo, hi;
        team_share(b0, b1, &lo, &hi);
        if (lo < hi && backward)
            backwards[build_current](&M, &G, lo, hi,
                                     (float *)team_slice(&masked, (size_t)team_rank()));
        else if (lo < hi)
            forwards[build_current](&M, lo, hi);
    }
    Py_END_ALLOW_THREADS
    free(masked.raw);
    Py_RETURN_NONE;
}

/* forward(out, c, mu, sigma, pos, real, alpha, gate, rows_per_batch, Tk, K, mode, fixed_gate,
 *         b0, b1, (0, 0, 0, 0, 0, 0)) */
static PyObject *mixture_forward(PyObject *self, PyObject *args) { return run_mixture(args, 0); }

/* backward(0, c, mu, sigma, pos, real, alpha, gate, rows_per_batch, Tk, K, mode, fixed_gate,
 *          b0, b1, (grad, dc, dmu, dsigma, dalpha or 0, dgate or 0)): all written. */
static PyObject *mixture_backward(PyObject *self, PyObject *args) { return run_mixture(args, 1); }

/* Rows below which the parameters are computed on one thread: about 25 us forward per 1000
 * rows on one thread, and inside a training layer at 4,096 rows one thread took 0.13 ms where
 * two (then on a pool) took 0.21-0.27 (one-off timings, not bench figures). */
#define PARAMS_ROWS_PER_THREAD 16384

/* The mixture's parameters from the raw predictor outputs (variant "approx", eq. 10-12 and 14,
 * gmm_params.h) and their backward, for sentences b0 ... b1-1 with the GIL released.
 *   params_forward(raw, length, c, mu, sigma, gate, rows_per_batch, raw_stride, layout..., b0,
 *                  b1, (0, 0, 0, 0, 0))
 *   params_backward(raw, length, 0, 0, 0, 0, rows_per_batch, raw_stride, layout..., b0, b1,
 *                   (dc, dmu, dsigma, dgate or 0, draw))
 * raw (rows, raw_stride); length J (rows,); c, mu, sigma, dc, dmu, dsigma (rows, K); gate,
 * dgate (rows,) (gate: 0 with a fixed gate); draw (rows, raw_stride), every column written. */
static PyObject *run_params(PyObject *args, int backward) {
    unsigned long long raw_p, length_p, c_p, mu_p, sigma_p, gate_p, g[5];
    Py_ssize_t rows_per_batch, raw_stride, b0, b1;
    Layout L;
    if (!PyArg_ParseTuple(args, "KKKKKKnniiiiiiiiffnn(KKKKK)", &raw_p, &length_p, &c_p, &mu_p,
                          &sigma_p, &gate_p, &rows_per_batch, &raw_stride, &L.k, &L.mu_col,
                          &L.mu_n, &L.sigma_col, &L.sigma_n, &L.omega_col, &L.gate_col,
                          &L.fusion, &L.sigma_min, &L.fixed_gate, &b0, &b1, &g[0], &g[1], &g[2],
                          &g[3], &g[4]))
        return NULL;
    if (L.k < 1 || L.k > MAX_K || raw_stride < 1 || raw_stride > 1 << 20 ||
        (backward ? (g[0] == 0 || g[1] == 0 || g[2] == 0 || g[4] == 0 ||
                     (L.gate_col >= 0 && g[3] == 0))
                  : (c_p == 0 || mu_p == 0 || sigma_p == 0))) {
        PyErr_Format(PyExc_ValueError,
                     "gmm_mixture params: K=%d outside 1-%d, raw_stride=%zd, or a missing "
                     "buffer",
                     L.k, MAX_K, raw_stride);
        return NULL;
    }
    const float *raw = (const float *)raw_p, *length = (const float *)length_p;
    int k = L.k;
    ParamsForwardFn forward = params_forwards[build_current];
    ParamsBackwardFn backward_fn = params_backwards[build_current];
    Py_BEGIN_ALLOW_THREADS
    TEAM_PARALLEL((b1 - b0) * rows_per_batch >= PARAMS_ROWS_PER_THREAD) {
    Py_ssize_t lo, hi;
    team_share(b0, b1, &lo, &hi);
    for (Py_ssize_t row = lo * rows_per_batch; row < hi * rows_per_batch; row += PARAMS_ROWS) {
        Py_ssize_t left = hi * rows_per_batch - row;
        int n = left < PARAMS_ROWS ? (int)left : PARAMS_ROWS;
        const float *x = raw + row * raw_stride;
        if (backward)
            backward_fn(x, raw_stride, length + row, 1, n, &L, (const float *)g[0] + row * k,
                        (const float *)g[1] + row * k, (const float *)g[2] + row * k,
                        L.gate_col >= 0 ? (const float *)g[3] + row : NULL,
                        (float *)g[4] + row * raw_stride, (int)raw_stride);
        else
            forward(x, raw_stride, length + row, 1, n, &L, (float *)c_p + row * k,
                    (float *)mu_p + row * k, (float *)sigma_p + row * k,
                    gate_p ? (float *)gate_p + row : NULL);
    }
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *params_forward(PyObject *self, PyObject *args) { return run_params(args, 0); }
static PyObject *params_backward(PyObject *self, PyObject *args) { return run_params(args, 1); }

/* The predictor bank's output layer (gmm_bank_head.h), rows r0 ... r1-1, GIL released:
 *   head_forward(pre, out, 0, w, bias, block, nd, d, total, width, r0, r1, (0, 0, 0))
 *   head_backward(hidden, grad, dpre, w, bias, block, nd, d, total, width, r0, r1, (G, S, 0))
 * pre (rows, nd): the hidden layer's pre-activation, overwritten with its sigmoid; out (rows,
 * width); w (total, d) the stored V^T; bias (width); block (total) int32 predictor indices;
 * grad (rows, width); dpre (rows, nd) written; G (total, d) and S (total) added to. */
static pthread_mutex_t head_lock = PTHREAD_MUTEX_INITIALIZER;

static PyObject *run_head(PyObject *args, int backward) {
    unsigned long long a, b, c, w, bias, block, sums[3];
    BankHead B;
    Py_ssize_t r0, r1;
    if (!PyArg_ParseTuple(args, "KKKKKKnnnnnn(KKK)", &a, &b, &c, &w, &bias, &block, &B.nd, &B.d,
                          &B.total, &B.width, &r0, &r1, &sums[0], &sums[1], &sums[2]))
        return NULL;
    if (B.d < 1 || B.nd < B.d || B.total < 1 || B.width < B.total || a == 0 || b == 0 ||
        w == 0 || bias == 0 || block == 0 || (backward && (c == 0 || sums[0] == 0 ||
                                                           sums[1] == 0))) {
        PyErr_Format(PyExc_ValueError,
                     "gmm bank head: d=%zd, nd=%zd, total=%zd, width=%zd, or a missing buffer",
                     B.d, B.nd, B.total, B.width);
        return NULL;
    }
    B.w = (const float *)w;
    B.bias = (const float *)bias;
    B.block = (const int32_t *)block;
    size_t table = (size_t)(B.total * B.d + B.total), most = (size_t)team_most();
    TeamScratch own = {NULL, NULL, 0}; /* backward: per thread its sums G and S, zeroed */
    if (backward && !team_scratch(&own, most, table * sizeof(float), 1)) return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    TEAM_PARALLEL(r1 - r0 > 1) {
        Py_ssize_t lo, hi;
        team_share(r0, r1, &lo, &hi);
        if (lo < hi && backward) {
            float *G = (float *)team_slice(&own, (size_t)team_rank());
            head_backwards[build_current](&B, (const float *)b, (const float *)a, (float *)c, G,
                                          G + B.total * B.d, lo, hi);
        } else if (lo < hi) {
            head_forwards[build_current](&B, (float *)a, (float *)b, lo, hi);
        }
    }
    if (backward) { /* ranks in order; a rank without rows left its sums at 0 */
        pthread_mutex_lock(&head_lock);
        float *G = (float *)sums[0], *S = (float *)sums[1];
        for (size_t rank = 0; rank < most; rank++) {
            const float *mine = (const float *)team_slice(&own, rank);
            for (Py_ssize_t i = 0; i < B.total * B.d; i++) G[i] += mine[i];
            for (Py_ssize_t o = 0; o < B.total; o++) S[o] += mine[B.total * B.d + o];
        }
        pthread_mutex_unlock(&head_lock);
    }
    Py_END_ALLOW_THREADS
    free(own.raw);
    Py_RETURN_NONE;
}

static PyObject *head_forward(PyObject *self, PyObject *args) { return run_head(args, 0); }
static PyObject *head_backward(PyObject *self, PyObject *args) { return run_head(args, 1); }

static PyMethodDef methods[] = {
    {"head_forward", head_forward, METH_VARARGS, "predictor output layer (see gmm_bank_head.h)."},
    {"head_backward", head_backward, METH_VARARGS, "its backward (see gmm_bank_head.h)."},
    {"forward", mixture_forward, METH_VARARGS, "eq. 6 and 13 forward (see gmm_mixture.py)."},
    {"backward", mixture_backward, METH_VARARGS, "eq. 6 and 13 backward (see gmm_mixture.py)."},
    {"params_forward", params_forward, METH_VARARGS, "eq. 10-12 and 14 (see gmm_mixture.py)."},
    {"params_backward", params_backward, METH_VARARGS, "their backward (see gmm_mixture.py)."},
    BUILD_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gmm_mixture", NULL, -1, methods};

PyMODINIT_FUNC PyInit__gmm_mixture(void) {
    detect_builds();
    return PyModule_Create(&module);
}
