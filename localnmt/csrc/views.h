/* Strided (B, H, T, d) float32 tensors passed from Python by address and strides, shared by
 * relative.c and gmm_step.c (their wrappers build the tuples: fast/native/__init__.py,
 * view_of). */
#ifndef LOCALNMT_VIEWS_H
#define LOCALNMT_VIEWS_H

#include <Python.h>

/* A (B, H, T, d) tensor with a contiguous last dimension: row (b, h, t) at AT(view, b, h, t). */
typedef struct {
    float *p;
    Py_ssize_t b, h, t; /* strides in floats */
} View;
#define AT(V, bb, hh, tt) ((V).p + (bb) * (V).b + (hh) * (V).h + (tt) * (V).t)

/* A view from its Python tuple (address, stride of b, of h, of t); 0 with an exception set. */
static int parse_view(PyObject *tuple, View *V) {
    unsigned long long address;
    if (!PyArg_ParseTuple(tuple, "Knnn", &address, &V->b, &V->h, &V->t)) return 0;
    V->p = (float *)address;
    return 1;
}

#endif
