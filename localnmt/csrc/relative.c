/* Attention with relative position representations on the CPU, float32, forward and backward
 * (Shaw et al. 2018, eqs. 3-5; "Rel_Pos" of Yang et al. 2018, Table 4).
 *
 * Python wrapper and the conditions it is used under: localnmt/attention/fast/native/
 * c_relative.py. Query i of head h attends the allowed keys j of its sentence (real keys;
 * j <= i + Tk - Tq under the causal triangle) with logits e_ij = q_i·(k_j + w^K[r_ij]) and
 * output Σ_j p_ij (v_j + w^V[r_ij]), one softmax over the row, r_ij the clipped distance's
 * row of the tables. Backward recomputes the probabilities from the saved log-sum-exp, so no
 * (Tq, Tk) tensor is kept.
 *
 * Buffers (addresses passed as integers): q, out (B, H, Tq, d) and k, v (B, H, Tk, d), each as
 * (address, stride of b, of h, of t) with its last dimension contiguous (the head-split views
 * of the projections, read in place); lse (B, H, Tq), wk, wv (R, d), buckets (B, Tq, Tk)
 * int64 in [0, R) and real (B, Tk) uint8 (or 0 for no padding), contiguous. A call covers sentences b0 … b1-1 with the GIL released, so the wrapper runs
 * sentence ranges on several threads. The table gradients: each thread of a call sums its
 * sentences' share into a scratch of its own, and the call adds the scratches to dwk, dwv in
 * the order of the threads' ranks after they end (the same sums in the same order at a given
 * thread count); calls from several Python threads (the wrappers' pool) add theirs under a
 * lock.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "builds.h"
#include "views.h"
#include "vec_math.h"


typedef struct {
    View q, k, v, out;
    float *lse;
    const float *wk, *wv;
    const int64_t *buckets;
    const uint8_t *real;
    Py_ssize_t h, tq, tk, d, r;
    int causal;
} Relative;

typedef struct {
    View dout, dq, dk, dv;
    float *dwk, *dwv;
} Grads;

#define SUFFIX _baseline
#define TARGET
#ifdef HAVE_X86_BUILDS
#define EXP exp_sse2
#else
#define EXP exp_floor
#endif
#include "relative_impl.h"
#undef SUFFIX
#undef TARGET
#undef EXP

#ifdef HAVE_X86_BUILDS
#define SUFFIX _avx2
#define TARGET TARGET_AVX2
#define EXP exp_floor
#include "relative_impl.h"
#undef SUFFIX
#undef TARGET
#undef EXP

#define SUFFIX _avx512
#define TARGET TARGET_AVX512
#define EXP exp_floor
#include "relative_impl.h"
#undef SUFFIX
#undef TARGET
#undef EXP
#endif

typedef void (*ForwardFn)(const Relative *, Py_ssize_t, Py_ssize_t, float *, Py_ssize_t *);
typedef void (*BackwardFn)(const Relative *, const Grads *, float *, float *, Py_ssize_t,
                           Py_ssize_t, float *, Py_ssize_t *);

#ifdef HAVE_X86_BUILDS
static const ForwardFn forwards[N_BUILDS] = {forward__avx512, forward__avx2, forward__baseline};
static const BackwardFn backwards[N_BUILDS] = {backward__avx512, backward__avx2,
                                               backward__baseline};
#else
static const ForwardFn forwards[N_BUILDS] = {forward__baseline};
static const BackwardFn backwards[N_BUILDS] = {backward__baseline};
#endif

/* Guards the sums into dwk, dwv: calls from several Python threads (the pool) add to them. */
static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;

/* Parse the problem shared by forward and backward; returns 0 with an exception set. */
static int parse_relative(PyObject *args, Relative *P, Grads *G, Py_ssize_t *b0,
                          Py_ssize_t *b1) {
    PyObject *q, *k, *v, *out, *dout, *dq, *dk, *dv;
    unsigned long long lse, wk, wv, buckets, real, dwk, dwv; /* "K": addresses */
    if (!PyArg_ParseTuple(args, "OOOOKKKKKnnnnninn(OOOOKK)", &q, &k, &v, &out, &lse, &wk, &wv,
                          &buckets, &real, &P->h, &P->tq, &P->tk, &P->d, &P->r, &P->causal, b0,
                          b1, &dout, &dq, &dk, &dv, &dwk, &dwv))
        return 0;
    if (!parse_view(q, &P->q) || !parse_view(k, &P->k) || !parse_view(v, &P->v) ||
        !parse_view(out, &P->out) || !parse_view(dout, &G->dout) || !parse_view(dq, &G->dq) ||
        !parse_view(dk, &G->dk) || !parse_view(dv, &G->dv))
        return 0;
    P->lse = (float *)lse;
    P->wk = (const float *)wk;
    P->wv = (const float *)wv;
    P->buckets = (const int64_t *)buckets;
    P->real = (const uint8_t *)real;
    G->dwk = (float *)dwk;
    G->dwv = (float *)dwv;
    if (P->h < 1 || P->tq < 1 || P->tk < 1 || P->d < 1 || P->r < 1) {
        PyErr_Format(PyExc_ValueError,
                     "relative: H=%zd, Tq=%zd, Tk=%zd, d=%zd, R=%zd must all be >= 1", P->h,
                     P->tq, P->tk, P->d, P->r);
        return 0;
    }
    return 1;
}

/* Forward (backward = 0) or backward of sentences b0 … b1-1, with the GIL released. */
static PyObject *run_relative(PyObject *args, int backward) {
    Relative P;
    Grads G;
    Py_ssize_t b0, b1;
    if (!parse_relative(args, &P, &G, &b0, &b1)) return NULL;
    size_t most = (size_t)team_most();
    size_t table = (size_t)(P.r * P.d);
    /* per thread: scores and ds (tk each), the backward's sums per bucket (r each, twice) */
    size_t each = 2 * (size_t)P.tk + 2 * (size_t)P.r;
    /* per thread, each on its own cache lines (builds.h, team_scratch) */
    TeamScratch score = {NULL, NULL, 0}, keys = {NULL, NULL, 0}, tables = {NULL, NULL, 0};
    if (!team_scratch(&score, most, each * sizeof(float), 0) ||
        !team_scratch(&keys, most, (size_t)P.tk * sizeof(Py_ssize_t), 0) ||
        (backward && !team_scratch(&tables, most, 2 * table * sizeof(float), 1))) {
        free(score.raw);
        free(keys.raw);
        free(tables.raw);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    TEAM_PARALLEL(b1 - b0 > 1) {
        Py_ssize_t lo, hi;
        team_share(b0, b1, &lo, &hi);
        size_t rank = (size_t)team_rank();
        float *my_score = (float *)team_slice(&score, rank);
        Py_ssize_t *my_keys = (Py_ssize_t *)team_slice(&keys, rank);
        if (lo < hi && backward) {
            float *gwk = (float *)team_slice(&tables, rank), *gwv = gwk + table;
            backwards[build_current](&P, &G, gwk, gwv, lo, hi, my_score, my_keys);
        } else if (lo < hi) {
            forwards[build_current](&P, lo, hi, my_score, my_keys);
        }
    }
    if (backward) { /* ranks in order; a rank without sentences left its scratch at 0 */
        pthread_mutex_lock(&tables_lock);
        for (size_t rank = 0; rank < most; rank++) {
            const float *gwk = (const float *)team_slice(&tables, rank), *gwv = gwk + table;
            for (size_t c = 0; c < table; c++) {
                G.dwk[c] += gwk[c];
                G.dwv[c] += gwv[c];
            }
        }
        pthread_mutex_unlock(&tables_lock);
    }
    Py_END_ALLOW_THREADS
    free(score.raw);
    free(keys.raw);
    free(tables.raw);
    Py_RETURN_NONE;
}

/* forward(q, k, v, out, lse, wk, wv, buckets, real, H, Tq, Tk, d, R, causal, b0, b1,
 *         (dout, dq, dk, dv, dwk, dwv)), each of q … out and dout … dv a view tuple
 *         (address, stride b, stride h, stride t); the gradients are not read. */
static PyObject *relative_forward(PyObject *self, PyObject *args) { return run_relative(args, 0); }

/* backward(the same arguments): dq written, dk, dv, dwk and dwv added to. */
static PyObject *relative_backward(PyObject *self, PyObject *args) {
    return run_relative(args, 1);
}

static PyMethodDef methods[] = {
    {"forward", relative_forward, METH_VARARGS, "Relative attention forward (c_relative.py)."},
    {"backward", relative_backward, METH_VARARGS, "Relative attention backward (c_relative.py)."},
    BUILD_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_relative", NULL, -1, methods};

PyMODINIT_FUNC PyInit__relative(void) {
    detect_builds();
    return PyModule_Create(&module);
}
