/* The builds of a C kernel, fastest first, and the one in use: chosen at import by the CPU,
 * switchable from Python for tests (use, builds, in_use). Shared by gmm_step.c and band.c;
 * each keeps its own table of functions indexed like build_names. */
#ifndef LOCALNMT_BUILDS_H
#define LOCALNMT_BUILDS_H

#include <Python.h>
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

#define BUILD_METHODS                                                                            \
    {"use", use, METH_VARARGS, "Run the named build."},                                         \
        {"builds", supported_builds, METH_NOARGS, "Builds this CPU runs, fastest first."},      \
        {"in_use", in_use, METH_NOARGS, "The build in use."},                                   \
        {"source_digest", source_digest, METH_NOARGS, "Digest of the sources built."}

#endif
