/* The builds of a C kernel, fastest first, and the one in use: chosen at import by the CPU,
 * switchable from Python for tests (use, builds, in_use). Shared by gmm_step.c and band.c;
 * each keeps its own table of functions indexed like build_names. */
#ifndef LOCALNMT_BUILDS_H
#define LOCALNMT_BUILDS_H

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vec_math.h"

#ifdef HAVE_X86_BUILDS
#define N_BUILDS 3
static const char *const build_names[N_BUILDS] = {"avx512", "avx2", "baseline"};
#else
#define N_BUILDS 1
static const char *const build_names[N_BUILDS] = {"baseline"};
#endif
static int build_supported[N_BUILDS];
static int build_current;

/* At import: which builds this CPU runs; the fastest of them is used. */
static void detect_builds(void) {
#ifdef HAVE_X86_BUILDS
    build_supported[0] = cpu_runs_avx512();
    build_supported[1] = cpu_runs_avx2();
#endif
    build_supported[N_BUILDS - 1] = 1;
    build_current = N_BUILDS - 1;
    for (int i = N_BUILDS - 1; i >= 0; i--)
        if (build_supported[i]) build_current = i;
}

/* use(name): run that build from now on (tests run each one the CPU supports). */
static PyObject *use(PyObject *self, PyObject *args) {
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    for (int i = 0; i < N_BUILDS; i++)
        if (build_supported[i] && strcmp(build_names[i], name) == 0) {
            build_current = i;
            Py_RETURN_NONE;
        }
    PyErr_Format(PyExc_ValueError, "build '%s' is not available on this CPU", name);
    return NULL;
}

/* builds(): the names of the builds this CPU runs, fastest first. */
static PyObject *supported_builds(PyObject *self, PyObject *noargs) {
    PyObject *names = PyList_New(0);
    if (names == NULL) return NULL;
    for (int i = 0; i < N_BUILDS; i++) {
        if (!build_supported[i]) continue;
        PyObject *name = PyUnicode_FromString(build_names[i]);
        if (name == NULL || PyList_Append(names, name) < 0) {
            Py_XDECREF(name);
            Py_DECREF(names);
            return NULL;
        }
        Py_DECREF(name);
    }
    return names;
}

/* in_use(): the build that runs now. */
static PyObject *in_use(PyObject *self, PyObject *noargs) {
    return PyUnicode_FromString(build_names[build_current]);
}

/* source_digest(): the digest of the sources this module was compiled from, passed in by
 * setup.py (localnmt/cbuild.py compares it with the sources beside the package). */
#ifndef LOCALNMT_SOURCE_DIGEST
#define LOCALNMT_SOURCE_DIGEST ""
#endif
static PyObject *source_digest(PyObject *self, PyObject *noargs) {
    return PyUnicode_FromString(LOCALNMT_SOURCE_DIGEST);
}

/* The threads a call runs on. Built with OpenMP, a kernel splits its sentences among the
 * OpenMP team of the thread that calls it. setup.py links libgomp by its soname, and the
 * wrappers load the extension after torch: the dynamic loader then binds it to the libgomp
 * torch already loaded, so the team is torch's own intra-op threads, as many as
 * torch.set_num_threads gave, spinning or sleeping as torch's do. A second pool beside them
 * would put three busy threads on two cores whenever torch's threads spin (its default).
 * Bound to another runtime than torch's (a torch wheel whose libgomp has another soname, or
 * Intel's), or built without OpenMP, the kernels run each call on its calling thread and the
 * wrappers split the sentences among a pool of their own (attention/fast/native/__init__.py). */
/* DEFINE_PER_BUILD(DEFINE, NAME): DEFINE(NAME_<build>, exp, target attribute) for each build
 * (the exps of vec_math.h); BUILD_TABLE(NAME, SUFFIX): the functions NAME_<build>SUFFIX in
 * build order (fastest first), for a table indexed by build_current. */
#ifdef HAVE_X86_BUILDS
#define DEFINE_PER_BUILD(DEFINE, NAME)                                                          \
    DEFINE(NAME##_baseline, exp_sse2, )                                                         \
    DEFINE(NAME##_avx2, exp_floor, TARGET_AVX2)                                                 \
    DEFINE(NAME##_avx512, exp_floor, TARGET_AVX512)
#define BUILD_TABLE(NAME, SUFFIX) {NAME##_avx512##SUFFIX, NAME##_avx2##SUFFIX, NAME##_baseline##SUFFIX}
#else
#define DEFINE_PER_BUILD(DEFINE, NAME) DEFINE(NAME##_baseline, exp_floor, )
#define BUILD_TABLE(NAME, SUFFIX) {NAME##_baseline##SUFFIX}
#endif

#ifdef _OPENMP
#include <dlfcn.h>
#include <omp.h>
#define TEAM_PRAGMA(text) _Pragma(#text)
#define TEAM_PARALLEL(cond) TEAM_PRAGMA(omp parallel if (team_on && (cond)))
static inline int team_rank(void) { return omp_get_thread_num(); }
static inline int team_size(void) { return omp_get_num_threads(); }
static inline int team_most(void) { return omp_get_max_threads(); }
#else
#define TEAM_PARALLEL(cond)
static inline int team_rank(void) { return 0; }
static inline int team_size(void) { return 1; }
static inline int team_most(void) { return 1; }
#endif

#ifdef _OPENMP
#define TEAM_ATOMIC_WRITE TEAM_PRAGMA(omp atomic write)
#else
#define TEAM_ATOMIC_WRITE
#endif

/* Whether the calls split among the OpenMP team: set from Python (use_team) once it knows the
 * runtime is torch's; off, every call runs on its calling thread. */
static int team_on;

/* use_team(flag): split the calls' sentences among the OpenMP team from now on, or not. */
static PyObject *use_team(PyObject *self, PyObject *args) {
    int flag;
    if (!PyArg_ParseTuple(args, "p", &flag)) return NULL;
    team_on = flag;
    Py_RETURN_NONE;
}

/* Per-thread scratch of a call: one slice of `bytes` per rank, each slice starting on its own
 * TEAM_LINE boundary. A cache line that two threads write moves between their cores at every
 * write (false sharing); slices packed end to end share a line at each boundary, and a slice
 * written on every row (the backward's per-thread sums) then ran slower on two threads than
 * on one. TEAM_LINE is two 64-byte lines: x86 prefetchers fetch lines in pairs. */
#define TEAM_LINE ((size_t)128)

typedef struct {
    void *raw;     /* what malloc / calloc gave: free(raw) */
    char *base;    /* raw rounded up to TEAM_LINE */
    size_t stride; /* bytes from one rank's slice to the next: a multiple of TEAM_LINE */
} TeamScratch;

/* Allocate `ranks` slices of `bytes` (zeroed if asked); 0 where the memory could not be had. */
static inline int team_scratch(TeamScratch *t, size_t ranks, size_t bytes, int zeroed) {
    size_t stride = (bytes + TEAM_LINE - 1) / TEAM_LINE * TEAM_LINE;
    if (stride == 0) stride = TEAM_LINE;
    size_t total = stride * (ranks > 0 ? ranks : 1) + TEAM_LINE;
    t->raw = zeroed ? calloc(total, 1) : malloc(total);
    t->stride = stride;
    t->base = t->raw == NULL
                  ? NULL
                  : (char *)(((uintptr_t)t->raw + TEAM_LINE - 1) & ~(uintptr_t)(TEAM_LINE - 1));
    return t->raw != NULL;
}

/* The slice of `rank`. */
static inline void *team_slice(const TeamScratch *t, size_t rank) {
    return t->base + t->stride * rank;
}

/* This thread's share [*lo, *hi) of the sentences b0 ... b1-1 (inside TEAM_PARALLEL). */
static inline void team_share(Py_ssize_t b0, Py_ssize_t b1, Py_ssize_t *lo, Py_ssize_t *hi) {
    Py_ssize_t n = b1 - b0, rank = team_rank(), size = team_size();
    *lo = b0 + n * rank / size;
    *hi = b0 + n * (rank + 1) / size;
}

/* The end of a call over sentences B0 ... B1-1 split among the team: each thread runs SHARE, an
 * expression of its share [lo, hi) that gives 1, or 0 where its scratch could not be had, with
 * the GIL released; the call then returns MemoryError where a share failed, else None. */
#define RETURN_TEAM_SHARES(B0, B1, SHARE)                                                        \
    do {                                                                                        \
        int failed_ = 0;                                                                        \
        Py_BEGIN_ALLOW_THREADS                                                                  \
        TEAM_PARALLEL((B1) - (B0) > 1) {                                                        \
            Py_ssize_t lo, hi;                                                                  \
            team_share(B0, B1, &lo, &hi);                                                       \
            if (lo < hi && !(SHARE)) {                                                          \
                TEAM_ATOMIC_WRITE                                                               \
                failed_ = 1;                                                                    \
            }                                                                                   \
        }                                                                                       \
        Py_END_ALLOW_THREADS                                                                    \
        if (failed_) return PyErr_NoMemory();                                                   \
        Py_RETURN_NONE;                                                                         \
    } while (0)

/* team_library(): the path of the OpenMP runtime the calls split their sentences with, or None
 * (built without OpenMP). The wrappers use it only where it is the one torch runs on. */
static PyObject *team_library(PyObject *self, PyObject *noargs) {
#ifdef _OPENMP
    Dl_info info;
    if (dladdr((void *)omp_get_max_threads, &info) && info.dli_fname != NULL)
        return PyUnicode_FromString(info.dli_fname);
#endif
    Py_RETURN_NONE;
}

#define BUILD_METHODS                                                                            \
    {"use", use, METH_VARARGS, "Run the named build."},                                         \
        {"team_library", team_library, METH_NOARGS, "The OpenMP runtime of the calls, or None."}, \
        {"use_team", use_team, METH_VARARGS, "Split the calls among the OpenMP team, or not."},  \
        {"builds", supported_builds, METH_NOARGS, "Builds this CPU runs, fastest first."},      \
        {"in_use", in_use, METH_NOARGS, "The build in use."},                                   \
        {"source_digest", source_digest, METH_NOARGS, "Digest of the sources built."}

#endif
