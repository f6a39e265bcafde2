/* Band attention on the CPU, float32, forward and backward (1D-CSAN eq. 4-6 and 2D-CSAN eq. 7-9
 * of Yang et al. 2019, and every other band restriction the band kernel takes).
 *
 * Python wrapper and the conditions it is used under: localnmt/attention/fast/band.py
 * (_CBand). Query i of head h attends the real keys j with -left[h] <= j - i <= right[h] of
 * one head (1D: its own) or of 2a+1 heads (2D head area: heads (h + g - a) mod H, read in
 * place), one softmax over all of them. Work and memory are linear in T: each query visits
 * only its window, and backward recomputes the probabilities from the saved log-sum-exp.
 *
 * Buffers (contiguous, addresses passed as integers): q, k, v, out (B, H, T, d); lse (B, H, T);
 * real (B, T) uint8 or 0 for no padding; left, right (H,) int64. A call covers sentences
 * b0 … b1-1 with the GIL released, so the wrapper runs sentence ranges on several threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builds.h"
#include "vec_math.h"
#include "weighted_rows.h"

typedef struct {
    const float *q, *k, *v;
    float *out, *lse;
    const uint8_t *real;
    const int64_t *left, *right;
    Py_ssize_t h, t, d;
    int groups, area; /* area -1: 1D (groups 1) */
} Band;

#define SUFFIX _baseline
#define TARGET
#ifdef HAVE_X86_BUILDS
#define EXP exp_sse2
#else
#define EXP exp_floor
#endif
#include "band_impl.h"
#undef SUFFIX
#undef TARGET
#undef EXP

#ifdef HAVE_X86_BUILDS
#define SUFFIX _avx2
#define TARGET TARGET_AVX2
#define EXP exp_floor
#include "band_impl.h"
#undef SUFFIX
#undef TARGET
#undef EXP

#define SUFFIX _avx512
#define TARGET TARGET_AVX512
#define EXP exp_floor
#include "band_impl.h"
#undef SUFFIX
#undef TARGET
#undef EXP
#endif

typedef void (*ForwardFn)(const Band *, Py_ssize_t, Py_ssize_t, float *, Py_ssize_t *);
typedef void (*BackwardFn)(const Band *, const float *, float *, float *, float *, Py_ssize_t,
                           Py_ssize_t, float *, Py_ssize_t *);

#ifdef HAVE_X86_BUILDS
static const ForwardFn forwards[N_BUILDS] = {forward__avx512, forward__avx2, forward__baseline};
static const BackwardFn backwards[N_BUILDS] = {backward__avx512, backward__avx2,
                                               backward__baseline};
#else
static const ForwardFn forwards[N_BUILDS] = {forward__baseline};
static const BackwardFn backwards[N_BUILDS] = {backward__baseline};
#endif

/* Parse the problem shared by forward and backward; returns 0 with an exception set. */
static int parse_band(PyObject *args, Band *P, Py_ssize_t *b0, Py_ssize_t *b1,
                      unsigned long long *grads) {
    unsigned long long q, k, v, out, lse, real, left, right; /* "K": addresses */
    if (!PyArg_ParseTuple(args, "KKKKKKKKnnniinn(KKKK)", &q, &k, &v, &out, &lse, &real, &left,
                          &right, &P->h, &P->t, &P->d, &P->groups, &P->area, b0, b1, &grads[0],
                          &grads[1], &grads[2], &grads[3]))
        return 0;
    P->q = (const float *)q;
    P->k = (const float *)k;
    P->v = (const float *)v;
    P->out = (float *)out;
    P->lse = (float *)lse;
    P->real = (const uint8_t *)real;
    P->left = (const int64_t *)left;
    P->right = (const int64_t *)right;
    if (P->groups < 1 || P->h < 1 || P->t < 1 || P->d < 1 || (P->area >= 0) != (P->groups > 1) ||
        (P->area >= 0 && P->groups != 2 * P->area + 1)) {
        PyErr_Format(PyExc_ValueError,
                     "band: H=%zd, T=%zd, d=%zd must be >= 1 and groups=%d must be 1 with "
                     "area=-1 or 2*area+1 with area >= 1 (area=%d)",
                     P->h, P->t, P->d, P->groups, P->area);
        return 0;
    }
    return 1;
}

/* Scratch for one query's window per thread, each thread's on its own cache lines (builds.h,
 * team_scratch): scores (twice the window: the backward keeps p and ds) and row offsets
 * (*each of them per thread). */
static int window_scratch(const Band *P, TeamScratch *score, TeamScratch *rows, size_t *each) {
    int64_t widest = 0;
    for (Py_ssize_t h = 0; h < P->h; h++) {
        int64_t w = P->left[h] + P->right[h] + 1;
        widest = w > widest ? w : widest;
    }
    widest = widest > P->t ? P->t : (widest < 1 ? 1 : widest);
    *each = (size_t)widest * (size_t)P->groups;
    size_t most = (size_t)team_most();
    if (!team_scratch(score, most, 2 * *each * sizeof(float), 0) ||
        !team_scratch(rows, most, *each * sizeof(Py_ssize_t), 0)) {
        free(score->raw);
        free(rows->raw);
        return 0;
    }
    return 1;
}

/* Forward (backward = 0) or backward of sentences b0 … b1-1, with the GIL released. */
static PyObject *run_band(PyObject *args, int backward) {
    Band P;
    Py_ssize_t b0, b1;
    unsigned long long g[4]; /* backward: dout, dq, dk, dv */
    if (!parse_band(args, &P, &b0, &b1, g)) return NULL;
    TeamScratch score = {NULL, NULL, 0}, rows = {NULL, NULL, 0};
    size_t each;
    if (!window_scratch(&P, &score, &rows, &each)) return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    TEAM_PARALLEL(b1 - b0 > 1) {
        Py_ssize_t lo, hi;
        team_share(b0, b1, &lo, &hi);
        float *my_score = (float *)team_slice(&score, (size_t)team_rank());
        Py_ssize_t *my_rows = (Py_ssize_t *)team_slice(&rows, (size_t)team_rank());
        if (lo < hi && backward)
            backwards[build_current](&P, (const float *)g[0], (float *)g[1], (float *)g[2],
                                     (float *)g[3], lo, hi, my_score, my_rows);
        else if (lo < hi)
            forwards[build_current](&P, lo, hi, my_score, my_rows);
    }
    Py_END_ALLOW_THREADS
    free(score.raw);
    free(rows.raw);
    Py_RETURN_NONE;
}

/* forward(q, k, v, out, lse, real, left, right, H, T, d, groups, area, b0, b1, (0, 0, 0, 0)) */
static PyObject *band_forward(PyObject *self, PyObject *args) { return run_band(args, 0); }

/* backward(q, k, v, out, lse, real, left, right, H, T, d, groups, area, b0, b1,
 *          (dout, dq, dk, dv)): dq written, dk and dv added to. */
static PyObject *band_backward(PyObject *self, PyObject *args) { return run_band(args, 1); }

static PyMethodDef methods[] = {
    {"forward", band_forward, METH_VARARGS, "Band attention forward (see band.py, _CBand)."},
    {"backward", band_backward, METH_VARARGS, "Band attention backward (see band.py, _CBand)."},
    BUILD_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_band", NULL, -1, methods};

PyMODINIT_FUNC PyInit__band(void) {
    detect_builds();
    return PyModule_Create(&module);
}
