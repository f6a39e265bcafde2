/* out = sum_t p_t v_{keys[t]} over d floats, the rows at v + keys[t] * v_t: the product of one
 * query's attention weights with its keys' value rows, shared by gmm_step.c (GMM's and the
 * hard-coded Gaussian's decoding steps) and band_impl.h (band attention's output and dq).
 * Sixteen outputs stay in registers over all the keys at a time: adding each key's row into
 * out in memory makes every key wait for the store of the one before. Each output is summed
 * over the keys in their order, as that loop did. Instantiated per build
 * (DEFINE_WEIGHTED_ROWS(name, target attribute)). */
#ifndef LOCALNMT_WEIGHTED_ROWS_H
#define LOCALNMT_WEIGHTED_ROWS_H

#include <Python.h>

#define DEFINE_WEIGHTED_ROWS(NAME, TARGET)                                                      \
    TARGET static void NAME(const float *v, Py_ssize_t v_t, Py_ssize_t d, const Py_ssize_t *keys, \
                            Py_ssize_t n, const float *p, float *restrict out) {                \
        Py_ssize_t c = 0;                                                                       \
        for (; c + 16 <= d; c += 16) {                                                          \
            float acc[16] = {0};                                                                \
            for (Py_ssize_t t = 0; t < n; t++) {                                                \
                const float *row = v + keys[t] * v_t + c;                                       \
                for (int l = 0; l < 16; l++) acc[l] += p[t] * row[l];                           \
            }                                                                                   \
            for (int l = 0; l < 16; l++) out[c + l] = acc[l];                                   \
        }                                                                                       \
        for (; c < d; c++) {                                                                    \
            float acc = 0.0f;                                                                   \
            for (Py_ssize_t t = 0; t < n; t++) acc += p[t] * v[keys[t] * v_t + c];              \
            out[c] = acc;                                                                       \
        }                                                                                       \
    }

#endif
