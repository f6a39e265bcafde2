/* The output layer of GMM cross-attention's predictor FFNs in training, with the sigmoid
 * before it (Zhang & Feng 2021, eq. 7-9 and 14: V^T tanh(W^T Q(s_i) + b1) + b2, with tanh(x) =
 * 2 sigmoid(2x) - 1 as fast/autograd/predictor_gemms.py folds it), forward and backward.
 *
 * The hidden layer's products stay with torch's GEMMs; what follows them runs here, one pass
 * per row: each output column o belongs to one predictor p(o) and reads only that predictor's
 * d hidden units, so the block-diagonal product torch ran as a (width x n d) GEMM is 1/n of
 * its multiply-adds here, and the sigmoid and its backward ride along.
 *
 * Per row r, with pre the hidden layer's pre-activation (n d floats), w (total, d) the stored
 * V^T rows, bias (width) = b2 - V^T 1 padded with zeros:
 *   forward:  h = sigmoid(pre) (written over pre), out_o = bias_o + 2 sum_c w[o, c] h[p(o) d + c]
 *   backward: dh_u = sum_{o: p(o) d <= u < p(o) d + d} w[o, u - p(o) d] g_o, then
 *             dpre_u = dh_u h_u (1 - h_u)  (half the gradient of 2x: the caller's products
 *             carry the factors), and summed over the rows: G[o, c] += g_o h[p(o) d + c],
 *             S_o += g_o (the caller forms dV^T = 2 G - S 1^T and db2 = S).
 * Instantiated per build (DEFINE_BANK_HEAD(name, exp, target attribute)). */
#ifndef LOCALNMT_GMM_BANK_HEAD_H
#define LOCALNMT_GMM_BANK_HEAD_H

#include <Python.h>
#include <stdint.h>

#include "vec_math.h"

typedef struct {
    Py_ssize_t nd, d, total, width;
    const float *w, *bias;
    const int32_t *block; /* p(o) of each of the total output columns */
} BankHead;

#define DEFINE_BANK_HEAD(NAME, EXP, TARGET)                                                     \
    DEFINE_DOT(NAME##_dot, TARGET)                                                              \
                                                                                                \
    TARGET static void NAME##_forward(const BankHead *B, float *pre, float *out, Py_ssize_t r0, \
                                      Py_ssize_t r1) {                                          \
        Py_ssize_t nd = B->nd, d = B->d;                                                        \
        for (Py_ssize_t r = r0; r < r1; r++) {                                                  \
            float *restrict h = pre + r * nd;                                                   \
            for (Py_ssize_t u = 0; u < nd; u++) h[u] = 1.0f / (1.0f + EXP(-h[u]));              \
            float *restrict o_row = out + r * B->width;                                         \
            for (Py_ssize_t o = 0; o < B->total; o++) {                                         \
                float s = NAME##_dot(B->w + o * d, h + B->block[o] * d, d);                     \
                o_row[o] = B->bias[o] + 2.0f * s;                                               \
            }                                                                                   \
            for (Py_ssize_t o = B->total; o < B->width; o++) o_row[o] = B->bias[o];             \
        }                                                                                       \
    }                                                                                           \
                                                                                                \
    /* g (rows, width), h (rows, nd); dpre (rows, nd) written; G (total, d), S (total) added  \
     * to (this thread's sums) */                                                               \
    TARGET static void NAME##_backward(const BankHead *B, const float *g, const float *hidden,  \
                                       float *dpre, float *G, float *S, Py_ssize_t r0,          \
                                       Py_ssize_t r1) {                                         \
        Py_ssize_t nd = B->nd, d = B->d;                                                        \
        for (Py_ssize_t r = r0; r < r1; r++) {                                                  \
            const float *restrict h = hidden + r * nd;                                          \
            const float *restrict g_row = g + r * B->width;                                     \
            float *restrict dh = dpre + r * nd;                                                 \
            for (Py_ssize_t u = 0; u < nd; u++) dh[u] = 0.0f;                                   \
            for (Py_ssize_t o = 0; o < B->total; o++) {                                         \
                float go = g_row[o];                                                            \
                Py_ssize_t at = B->block[o] * d;                                                \
                const float *restrict w = B->w + o * d;                                         \
                float *restrict Go = G + o * d;                                                 \
                for (Py_ssize_t c = 0; c < d; c++) {                                            \
                    dh[at + c] += w[c] * go;                                                    \
                    Go[c] += go * h[at + c];                                                    \
                }                                                                               \
                S[o] += go;                                                                     \
            }                                                                                   \
            for (Py_ssize_t u = 0; u < nd; u++) dh[u] = dh[u] * (1.0f - h[u]) * h[u];           \
        }                                                                                       \
    }

#endif
