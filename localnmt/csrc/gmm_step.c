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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builds.h"
#include "gmm_params.h"
#include "vec_math.h"

typedef void (*MixtureFn)(const float *, int, int, const float *, const float *, const float *,
                          float *);

typedef void (*ParamsFn)(const float *, Py_ssize_t, const float *, Py_ssize_t, int,
                         const Layout *, float *, float *, float *, float *);

#ifdef HAVE_X86_BUILDS
DEFINE_MIXTURE(mixture_baseline, exp_sse2, )
DEFINE_MIXTURE(mixture_avx2, exp_floor, TARGET_AVX2)
DEFINE_MIXTURE(mixture_avx512, exp_floor, TARGET_AVX512)
DEFINE_PARAMS(params_baseline, exp_sse2, )
DEFINE_PARAMS(params_avx2, exp_floor, TARGET_AVX2)
DEFINE_PARAMS(params_avx512, exp_floor, TARGET_AVX512)
static const MixtureFn mixtures[N_BUILDS] = {mixture_avx512, mixture_avx2, mixture_baseline};
static const ParamsFn params[N_BUILDS] = {params_avx512_forward, params_avx2_forward,
                                          params_baseline_forward};
#else
DEFINE_MIXTURE(mixture_baseline, exp_floor, )
DEFINE_PARAMS(params_baseline, exp_floor, )
static const MixtureFn mixtures[N_BUILDS] = {mixture_baseline};
static const ParamsFn params[N_BUILDS] = {params_baseline_forward};
#endif

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
    {"one_term", one_term, METH_VARARGS, "The eq. 6 loop with one component (tests)."},
    BUILD_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gmm_step", NULL, -1, methods};

PyMODINIT_FUNC PyInit__gmm_step(void) {
    detect_builds();
    return PyModule_Create(&module);
}
