/* Gaussian mixture cross-attention (Zhang & Feng 2021), variant "approx": the mixture of a
 * block of rows from their raw predictor outputs (eq. 10-12, 14) and the gradient of that
 * conversion. Shared by gmm_step.c (decoding) and gmm_mixture.c (training); the torch ops of
 * GaussianMixture.mixture_params (localnmt/attention/methods/gmm.py) are the reference, and
 * DEFINE_PARAMS follows them operation by operation, with exp and log as plain arithmetic
 * (vec_math.h) so that its loops across rows vectorise.
 *
 * Per row with raw outputs x and s = sigmoid(x):
 *   log w_k = log_softmax(x_omega)_k            (eq. 10; -log K without an omega predictor)
 *   mu_k    = J * s_mu_k                        (eq. 11)
 *   sigma_k = max(min(J/2 * s_sigma_k, min(mu_k, J - mu_k)) / 3, sigma_min)   (eq. 12)
 *   c_k     = log w_k - (log sigma_k + log sqrt(2 pi))                        (log w/Z)
 *   g       = sigmoid(x_gate), or a fixed 0.5 / 1                             (eq. 14)
 */
#ifndef LOCALNMT_GMM_PARAMS_H
#define LOCALNMT_GMM_PARAMS_H

#include <math.h>

#include "vec_math.h"

#define EXP_FLOOR (-87.0f)
#define HALF_LOG_2PI 0.91893853320467274178f
#define MAX_K 64

/* c - z^2/2 with z = (p - mu) / sigma, floored at -87 (float32's smallest normal exponent):
 * the exponent of one term of eq. 6, in the torch ops' order. */
static inline __attribute__((always_inline)) float term_exponent(float p, float c, float mu,
                                                                 float sigma) {
    float z = (p - mu) / sigma;
    float e = c + (-0.5f * z) * z;
    return e < EXP_FLOOR ? EXP_FLOOR : e;
}

/* beta (eq. 6) of one row into acc[0..tk): one loop over the keys per component, vectorised,
 * over whole vectors of MIXTURE_LANES keys; the keys after the last whole vector as one more
 * vector padded with a real position and dropped (a scalar tail was most of a short row's
 * time). Each acc[j] sums the components in order from 0 either way. Instantiated per build
 * (AVX-512, AVX2 + FMA, x86-64's baseline) by gmm_step.c and gmm_mixture.c with that build's
 * EXP (vec_math.h) and TARGET. */
#define MIXTURE_LANES 16
#define DEFINE_MIXTURE(NAME, EXP, TARGET)                                                       \
    TARGET static void NAME(const float *restrict pos, int tk, int k, const float *c,           \
                            const float *mu, const float *sigma, float *restrict acc) {         \
        int full = tk / MIXTURE_LANES * MIXTURE_LANES, n = tk - full;                           \
        for (int j = 0; j < full; j++) acc[j] = 0.0f;                                           \
        for (int i = 0; i < k; i++) {                                                           \
            float ci = c[i], mi = mu[i], si = sigma[i];                                         \
            for (int j = 0; j < full; j++) acc[j] += EXP(term_exponent(pos[j], ci, mi, si));    \
        }                                                                                       \
        if (n == 0) return;                                                                     \
        float p[MIXTURE_LANES], a[MIXTURE_LANES];                                               \
        for (int l = 0; l < MIXTURE_LANES; l++) {                                               \
            p[l] = l < n ? pos[full + l] : pos[full];                                           \
            a[l] = 0.0f;                                                                        \
        }                                                                                       \
        for (int i = 0; i < k; i++) {                                                           \
            float ci = c[i], mi = mu[i], si = sigma[i];                                         \
            for (int l = 0; l < MIXTURE_LANES; l++) a[l] += EXP(term_exponent(p[l], ci, mi, si)); \
        }                                                                                       \
        for (int l = 0; l < n; l++) acc[full + l] = a[l];                                       \
    }

/* torch.lerp's two-sided formula (exact at weight 0 and 1). */
static inline float lerp(float start, float end, float weight) {
    return fabsf(weight) < 0.5f ? start + weight * (end - start)
                                : end - (end - start) * (1.0f - weight);
}

typedef struct {
    int k, mu_col, mu_n, sigma_col, sigma_n, omega_col, gate_col, fusion;
    float sigma_min, fixed_gate;
} Layout;

/* Rows per call of the parameter functions below: their loops run across rows, so that each
 * vectorises (a row has only K components). */
#define PARAMS_ROWS 32

/* Eq. 10-12 and 14 of n <= PARAMS_ROWS rows, and their backward, instantiated per build with
 * that build's EXP (vec_math.h) and TARGET; log is log_poly. Row r's raw outputs are
 * x[r * stride ...], its J length[r * length_stride]; c, mu, sigma are (n, K), gate (n,).
 * The backward writes every one of the row_width columns of dx[r * stride ...] from dc, dmu,
 * dsigma (n, K) and dgate (n,), following the torch ops of the reference (sigmoid,
 * log_softmax, minimum, clamp_min) one by one; torch.minimum's backward sends the gradient to
 * the smaller argument and half to each at a tie. */
#define DEFINE_PARAMS(NAME, EXP, TARGET)                                                         \
    static inline __attribute__((always_inline)) float NAME##_sigmoid(float x) {                 \
        return 1.0f / (1.0f + EXP(-x));                                                          \
    }                                                                                            \
                                                                                                 \
    /* column col of n rows into to[0..n): the loops over rows then read consecutive floats */   \
    static inline __attribute__((always_inline)) void NAME##_column(                             \
        const float *x, Py_ssize_t stride, int col, int n, float *restrict to) {                 \
        for (int r = 0; r < n; r++) to[r] = x[r * stride + col];                                 \
    }                                                                                            \
                                                                                                 \
    /* log_softmax's max and log-sum of each row's omega columns (eq. 10) */                     \
    TARGET static inline __attribute__((always_inline)) void NAME##_omega(                       \
        const float *x, Py_ssize_t stride, int n, const Layout *L, float *restrict top,          \
        float *restrict log_total) {                                                             \
        float w[PARAMS_ROWS];                                                                    \
        NAME##_column(x, stride, L->omega_col, n, top);                                          \
        for (int i = 1; i < L->k; i++) {                                                         \
            NAME##_column(x, stride, L->omega_col + i, n, w);                                    \
            for (int r = 0; r < n; r++) top[r] = w[r] > top[r] ? w[r] : top[r];                  \
        }                                                                                        \
        for (int r = 0; r < n; r++) log_total[r] = 0.0f;                                         \
        for (int i = 0; i < L->k; i++) {                                                         \
            NAME##_column(x, stride, L->omega_col + i, n, w);                                    \
            for (int r = 0; r < n; r++) log_total[r] += EXP(w[r] - top[r]);                      \
        }                                                                                        \
        for (int r = 0; r < n; r++) log_total[r] = log_poly(log_total[r]);                       \
    }                                                                                            \
                                                                                                 \
    TARGET static void NAME##_forward(const float *x, Py_ssize_t stride, const float *length,    \
                                      Py_ssize_t length_stride, int n, const Layout *L,          \
                                      float *c, float *mu, float *sigma, float *gate) {          \
        int k = L->k;                                                                            \
        const float sigma_min = L->sigma_min;                                                    \
        float len[PARAMS_ROWS], top[PARAMS_ROWS], log_total[PARAMS_ROWS], log_w[PARAMS_ROWS];    \
        float x_mu[PARAMS_ROWS], x_sigma[PARAMS_ROWS];                                           \
        float c_i[PARAMS_ROWS], mu_i[PARAMS_ROWS], sigma_i[PARAMS_ROWS];                         \
        for (int r = 0; r < n; r++) len[r] = length[r * length_stride];                          \
        if (L->omega_col >= 0) NAME##_omega(x, stride, n, L, top, log_total);                    \
        float uniform = -log_poly((float)k);                                                     \
        for (int i = 0; i < k; i++) {                                                            \
            NAME##_column(x, stride, L->mu_col + (L->mu_n == 1 ? 0 : i), n, x_mu);               \
            NAME##_column(x, stride, L->sigma_col + (L->sigma_n == 1 ? 0 : i), n, x_sigma);      \
            if (L->omega_col >= 0) {                                                             \
                NAME##_column(x, stride, L->omega_col + i, n, log_w);                            \
                for (int r = 0; r < n; r++) log_w[r] = log_w[r] - top[r] - log_total[r];         \
            } else {                                                                             \
                for (int r = 0; r < n; r++) log_w[r] = uniform;                                  \
            }                                                                                    \
            for (int r = 0; r < n; r++) {                                                        \
                float s_mu = NAME##_sigmoid(x_mu[r]);                                            \
                float s_sigma = NAME##_sigmoid(x_sigma[r]);                                      \
                float m = len[r] * s_mu;                                                         \
                float rest = len[r] - m;                                                         \
                float nearer = m < rest ? m : rest;                                              \
                float wide = (0.5f * len[r]) * s_sigma;                                          \
                float s = (wide < nearer ? wide : nearer) / 3.0f;                                \
                s = s < sigma_min ? sigma_min : s;                                               \
                mu_i[r] = m;                                                                     \
                sigma_i[r] = s;                                                                  \
                c_i[r] = log_w[r] - (log_poly(s) + HALF_LOG_2PI);                                \
            }                                                                                    \
            for (int r = 0; r < n; r++) {                                                        \
                c[r * k + i] = c_i[r];                                                           \
                mu[r * k + i] = mu_i[r];                                                         \
                sigma[r * k + i] = sigma_i[r];                                                   \
            }                                                                                    \
        }                                                                                        \
        if (gate == NULL) return;                                                                \
        if (L->gate_col >= 0) {                                                                  \
            NAME##_column(x, stride, L->gate_col, n, x_mu);                                      \
            for (int r = 0; r < n; r++) gate[r] = NAME##_sigmoid(x_mu[r]);                       \
        } else {                                                                                 \
            for (int r = 0; r < n; r++) gate[r] = L->fixed_gate;                                 \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
    TARGET __attribute__((unused)) static void NAME##_backward(                                  \
        const float *x, Py_ssize_t stride, const float *length, Py_ssize_t length_stride, int n, \
        const Layout *L, const float *dc, const float *dmu, const float *dsigma,                 \
        const float *dgate, float *dx, int row_width) {                                          \
        int k = L->k;                                                                            \
        const float sigma_min = L->sigma_min;                                                    \
        float len[PARAMS_ROWS], x_mu[PARAMS_ROWS], x_sigma[PARAMS_ROWS];                         \
        float dc_i[PARAMS_ROWS], dmu_i[PARAMS_ROWS], dsigma_i[PARAMS_ROWS];                      \
        float d_mu[PARAMS_ROWS], d_sigma[PARAMS_ROWS];                                           \
        for (int r = 0; r < n; r++) {                                                            \
            len[r] = length[r * length_stride];                                                  \
            for (int col = 0; col < row_width; col++) dx[r * stride + col] = 0.0f;               \
        }                                                                                        \
        for (int i = 0; i < k; i++) {                                                            \
            int mu_at = L->mu_col + (L->mu_n == 1 ? 0 : i);                                      \
            int sigma_at = L->sigma_col + (L->sigma_n == 1 ? 0 : i);                             \
            NAME##_column(x, stride, mu_at, n, x_mu);                                            \
            NAME##_column(x, stride, sigma_at, n, x_sigma);                                      \
            NAME##_column(dc, k, i, n, dc_i);                                                    \
            NAME##_column(dmu, k, i, n, dmu_i);                                                  \
            NAME##_column(dsigma, k, i, n, dsigma_i);                                            \
            for (int r = 0; r < n; r++) {                                                        \
                float s_mu = NAME##_sigmoid(x_mu[r]);                                            \
                float s_sigma = NAME##_sigmoid(x_sigma[r]);                                      \
                float half_length = 0.5f * len[r];                                               \
                float m = len[r] * s_mu;                                                         \
                float rest = len[r] - m;                                                         \
                float nearer = m < rest ? m : rest;                                              \
                float wide = half_length * s_sigma;                                              \
                float s0 = (wide < nearer ? wide : nearer) / 3.0f;                               \
                float s = s0 < sigma_min ? sigma_min : s0;                                       \
                /* c = log w - (log s + const); s = clamp_min(s0, sigma_min);                    \
                   s0 = min(wide, nearer) / 3; nearer = min(m, rest); rest = J - m */            \
                float ds = dsigma_i[r] - dc_i[r] / s;                                            \
                float ds0 = s0 >= sigma_min ? ds / 3.0f : 0.0f;                                  \
                float share = wide == nearer ? 0.5f * ds0 : ds0;                                 \
                float dwide = wide > nearer ? 0.0f : share;                                      \
                float dnearer = nearer > wide ? 0.0f : share;                                    \
                float share_m = m == rest ? 0.5f * dnearer : dnearer;                            \
                float dm = dmu_i[r] + (m > rest ? 0.0f : share_m);                               \
                float drest = rest > m ? 0.0f : share_m;                                         \
                dm -= drest;                                                                     \
                d_mu[r] = (dm * len[r]) * (1.0f - s_mu) * s_mu;                                  \
                d_sigma[r] = (dwide * half_length) * (1.0f - s_sigma) * s_sigma;                 \
            }                                                                                    \
            for (int r = 0; r < n; r++) {                                                        \
                dx[r * stride + mu_at] += d_mu[r];                                               \
                dx[r * stride + sigma_at] += d_sigma[r];                                         \
            }                                                                                    \
        }                                                                                        \
        if (L->omega_col >= 0) { /* log_softmax: dx = dlog_w - softmax * sum(dlog_w) */          \
            float top[PARAMS_ROWS], log_total[PARAMS_ROWS], dsum[PARAMS_ROWS];                   \
            NAME##_omega(x, stride, n, L, top, log_total);                                       \
            for (int r = 0; r < n; r++) dsum[r] = 0.0f;                                          \
            for (int i = 0; i < k; i++) {                                                        \
                NAME##_column(dc, k, i, n, dc_i);                                                \
                for (int r = 0; r < n; r++) dsum[r] += dc_i[r];                                  \
            }                                                                                    \
            for (int i = 0; i < k; i++) {                                                        \
                NAME##_column(x, stride, L->omega_col + i, n, x_mu);                             \
                NAME##_column(dc, k, i, n, dc_i);                                                \
                for (int r = 0; r < n; r++)                                                      \
                    d_mu[r] = dc_i[r] - EXP(x_mu[r] - top[r] - log_total[r]) * dsum[r];          \
                for (int r = 0; r < n; r++) dx[r * stride + L->omega_col + i] = d_mu[r];         \
            }                                                                                    \
        }                                                                                        \
        if (L->gate_col >= 0) {                                                                  \
            NAME##_column(x, stride, L->gate_col, n, x_mu);                                      \
            for (int r = 0; r < n; r++) {                                                        \
                float g = NAME##_sigmoid(x_mu[r]);                                               \
                d_mu[r] = dgate[r] * (1.0f - g) * g;                                             \
            }                                                                                    \
            for (int r = 0; r < n; r++) dx[r * stride + L->gate_col] = d_mu[r];                  \
        }                                                                                        \
    }

#endif
