/* GMM cross-attention's predictor FFNs for the rows of one decoding step (Zhang & Feng 2021,
 * eq. 7-9 and 14: V^T tanh(W^T Q(s_i) + b1) + b2 for every predictor at once), as the folded
 * weights of PredictorBank (methods/gmm.py, fast/autograd/predictor_gemms.py) give them:
 *
 *   hidden = sigmoid(q W1' + b1')     W1' = 2 scale W stacked, as W1t (d, nd): row c is input c
 *   raw    = hidden V' + b2'          V' block-diagonal (width, nd), b2' = b2 - V^T 1
 *
 * which is the predictors' output since tanh(x) = 2 sigmoid(2x) - 1. q is the pre-scaled query
 * row the attention reads (the fold carries the scale). Used by attention_step in gmm_step.c,
 * where the torch path runs two F.linear calls and a sigmoid per layer and step.
 *
 * The hidden layer runs PRED_ROWS rows against PRED_UNITS units at a time, so that each weight
 * row is read once for all of them and the sums stay in registers; rows beyond the real ones
 * repeat the last row and are not stored. Instantiated per build
 * (DEFINE_PREDICT(name, exp, target attribute)). */
#ifndef LOCALNMT_GMM_PREDICT_H
#define LOCALNMT_GMM_PREDICT_H

#include <Python.h>

#include "vec_math.h"

#define PRED_ROWS 4
#define PRED_UNITS 32

#define DEFINE_PREDICT(NAME, EXP, TARGET)                                                       \
    DEFINE_DOT(NAME##_dot, TARGET)                                                              \
                                                                                                \
    /* raw[r * width + o] for rows r < rows (<= PRED_ROWS) with inputs q[r] (d floats each); \
     * hidden: scratch of PRED_ROWS * nd floats */                                              \
    TARGET static void NAME(const float *const *q, int rows, Py_ssize_t d,                      \
                            const float *restrict w1t, const float *restrict b1, Py_ssize_t nd, \
                            const float *restrict w2, const float *restrict b2,                 \
                            Py_ssize_t width, float *restrict hidden, float *restrict raw) {    \
        const float *x[PRED_ROWS];                                                              \
        for (int r = 0; r < PRED_ROWS; r++) x[r] = q[r < rows ? r : rows - 1];                  \
        Py_ssize_t u0 = 0;                                                                      \
        for (; u0 + PRED_UNITS <= nd; u0 += PRED_UNITS) {                                       \
            float acc[PRED_ROWS][PRED_UNITS];                                                   \
            for (int r = 0; r < PRED_ROWS; r++)                                                 \
                for (int l = 0; l < PRED_UNITS; l++) acc[r][l] = b1[u0 + l];                    \
            for (Py_ssize_t c = 0; c < d; c++) {                                                \
                const float *w = w1t + c * nd + u0;                                             \
                for (int r = 0; r < PRED_ROWS; r++) {                                           \
                    float xc = x[r][c];                                                         \
                    for (int l = 0; l < PRED_UNITS; l++) acc[r][l] += w[l] * xc;                \
                }                                                                               \
            }                                                                                   \
            for (int r = 0; r < PRED_ROWS; r++)                                                 \
                for (int l = 0; l < PRED_UNITS; l++)                                            \
                    hidden[r * nd + u0 + l] = 1.0f / (1.0f + EXP(-acc[r][l]));                  \
        }                                                                                       \
        for (; u0 < nd; u0++) /* units after the last whole block */                            \
            for (int r = 0; r < PRED_ROWS; r++) {                                               \
                float s = b1[u0];                                                               \
                for (Py_ssize_t c = 0; c < d; c++) s += w1t[c * nd + u0] * x[r][c];             \
                hidden[r * nd + u0] = 1.0f / (1.0f + EXP(-s));                                  \
            }                                                                                   \
        for (int r = 0; r < rows; r++)                                                          \
            for (Py_ssize_t o = 0; o < width; o++)                                              \
                raw[r * width + o] = b2[o] + NAME##_dot(w2 + o * nd, hidden + r * nd, nd);      \
    }

#endif
