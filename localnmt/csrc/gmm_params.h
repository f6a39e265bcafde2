/* Gaussian mixture cross-attention (Zhang & Feng 2021), variant "approx": the mixture of one
 * row from its raw predictor outputs (eq. 10-12, 14) and the gradient of that conversion.
 * Shared by gmm_step.c (decoding) and gmm_mixture.c (training); the torch ops of
 * GaussianMixture.mixture_params (localnmt/attention/methods/gmm.py) are the reference, and
 * row_params / row_params_backward follow them operation by operation.
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

#define EXP_FLOOR (-87.0f)
#define HALF_LOG_2PI 0.91893853320467274178f
#define MAX_K 64

static inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* c - z^2/2 with z = (p - mu) / sigma, floored at -87 (float32's smallest normal exponent):
 * the exponent of one term of eq. 6, in the torch ops' order. */
static inline __attribute__((always_inline)) float term_exponent(float p, float c, float mu,
                                                                 float sigma) {
    float z = (p - mu) / sigma;
    float e = c + (-0.5f * z) * z;
    return e < EXP_FLOOR ? EXP_FLOOR : e;
}

/* beta (eq. 6) of one row into acc[0..tk): one loop over the keys per component, vectorised;
 * instantiated per build (AVX-512, AVX2 + FMA, x86-64's baseline) by gmm_step.c and
 * gmm_mixture.c with that build's EXP (vec_math.h) and TARGET. */
#define DEFINE_MIXTURE(NAME, EXP, TARGET)                                                      \
    TARGET static void NAME(const float *restrict pos, int tk, int k, const float *c,          \
                            const float *mu, const float *sigma, float *restrict acc) {        \
        for (int j = 0; j < tk; j++) acc[j] = 0.0f;                                            \
        for (int i = 0; i < k; i++) {                                                          \
            float ci = c[i], mi = mu[i], si = sigma[i];                                        \
            for (int j = 0; j < tk; j++) acc[j] += EXP(term_exponent(pos[j], ci, mi, si));     \
        }                                                                                      \
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

/* c, mu, sigma of one row's K components and its gate (eq. 10-12, 14). */
static void row_params(const float *x, float length, const Layout *L, float *c, float *mu,
                       float *sigma, float *gate) {
    int k = L->k;
    float log_w[MAX_K];
    if (L->omega_col >= 0) {
        const float *w = x + L->omega_col;
        float top = w[0];
        for (int i = 1; i < k; i++) top = w[i] > top ? w[i] : top;
        float total = 0.0f;
        for (int i = 0; i < k; i++) total += expf(w[i] - top);
        float log_total = logf(total);
        for (int i = 0; i < k; i++) log_w[i] = w[i] - top - log_total;
    } else {
        float uniform = -logf((float)k);
        for (int i = 0; i < k; i++) log_w[i] = uniform;
    }
    float half_length = 0.5f * length;
    for (int i = 0; i < k; i++) {
        float s_mu = sigmoid(x[L->mu_col + (L->mu_n == 1 ? 0 : i)]);
        float s_sigma = sigmoid(x[L->sigma_col + (L->sigma_n == 1 ? 0 : i)]);
        float m = length * s_mu;
        float rest = length - m;
        float nearer = m < rest ? m : rest;
        float wide = half_length * s_sigma;
        float s = (wide < nearer ? wide : nearer) / 3.0f;
        s = s < L->sigma_min ? L->sigma_min : s;
        mu[i] = m;
        sigma[i] = s;
        c[i] = log_w[i] - (logf(s) + HALF_LOG_2PI);
    }
    *gate = L->gate_col >= 0 ? sigmoid(x[L->gate_col]) : L->fixed_gate;
}

/* torch.minimum's backward for min(a, b) with gradient d: to a where a < b, to b where b < a,
 * half to each at a tie. */
static inline void min_backward(float a, float b, float d, float *da, float *db) {
    float share = a == b ? 0.5f * d : d;
    *da += a > b ? 0.0f : share;
    *db += b > a ? 0.0f : share;
}

/* The gradient of one row's raw predictor outputs dx (row_width columns, all written) from
 * the gradients of row_params' outputs: dc, dmu, dsigma (K each) and dgate, following the
 * torch ops of the reference (sigmoid, log_softmax, minimum, clamp_min) one by one. */
__attribute__((unused)) static void row_params_backward(const float *x, float length, const Layout *L,
                                const float *dc, const float *dmu, const float *dsigma,
                                float dgate, float *dx, int row_width) {
    int k = L->k;
    for (int i = 0; i < row_width; i++) dx[i] = 0.0f;
    float half_length = 0.5f * length;
    for (int i = 0; i < k; i++) {
        int mu_at = L->mu_col + (L->mu_n == 1 ? 0 : i);
        int sigma_at = L->sigma_col + (L->sigma_n == 1 ? 0 : i);
        float s_mu = sigmoid(x[mu_at]);
        float s_sigma = sigmoid(x[sigma_at]);
        float m = length * s_mu;
        float rest = length - m;
        float nearer = m < rest ? m : rest;
        float wide = half_length * s_sigma;
        float s0 = (wide < nearer ? wide : nearer) / 3.0f;
        float s = s0 < L->sigma_min ? L->sigma_min : s0;
        /* c = log w - (log s + const); s = clamp_min(s0, sigma_min); s0 = min(wide, nearer)/3 */
        float ds = dsigma[i] - dc[i] / s;
        float ds0 = s0 >= L->sigma_min ? ds : 0.0f;
        float dwide = 0.0f, dnearer = 0.0f, dm = dmu[i], drest = 0.0f;
        min_backward(wide, nearer, ds0 / 3.0f, &dwide, &dnearer);
        min_backward(m, rest, dnearer, &dm, &drest);
        dm -= drest;
        dx[mu_at] += (dm * length) * (1.0f - s_mu) * s_mu;
        dx[sigma_at] += (dwide * half_length) * (1.0f - s_sigma) * s_sigma;
    }
    if (L->omega_col >= 0) { /* log_softmax: dx = dlog_w - softmax * sum(dlog_w), dlog_w = dc */
        const float *w = x + L->omega_col;
        float top = w[0];
        for (int i = 1; i < k; i++) top = w[i] > top ? w[i] : top;
        float total = 0.0f, dsum = 0.0f;
        for (int i = 0; i < k; i++) {
            total += expf(w[i] - top);
            dsum += dc[i];
        }
        float log_total = logf(total);
        for (int i = 0; i < k; i++)
            dx[L->omega_col + i] = dc[i] - expf(w[i] - top - log_total) * dsum;
    }
    if (L->gate_col >= 0) {
        float g = sigmoid(x[L->gate_col]);
        dx[L->gate_col] = dgate * (1.0f - g) * g;
    }
}

#endif
