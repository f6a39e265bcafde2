/* Vectorisable float32 math shared by the C kernels (gmm_step.c, gmm_mixture.c, band.c). */
#ifndef LOCALNMT_VEC_MATH_H
#define LOCALNMT_VEC_MATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* exp for float32 as plain arithmetic (Cephes' expf: range reduction by ln 2, degree-6
 * polynomial, 2^n through the exponent bits), so that a loop over it vectorises. Relative error
 * about 1e-7 over the argument range used here, [-87, 0]. FLOOR: floor(x) for the range
 * reduction (x86-64's baseline SSE2 has no vector floor, so its version rounds by hand). */
#define DEFINE_EXP(NAME, FLOOR)                                                                \
    static inline __attribute__((always_inline)) float NAME(float x) {                         \
        x = x < -87.3f ? -87.3f : x;                                                           \
        x = x > 88.3f ? 88.3f : x;                                                             \
        float n = FLOOR(x * 1.44269504088896341f + 0.5f);                                       \
        float r = x - n * 0.693359375f;                                                        \
        r = r - n * -2.12194440e-4f;                                                           \
        float r2 = r * r;                                                                      \
        float p = 1.9875691500e-4f;                                                            \
        p = p * r + 1.3981999507e-3f;                                                          \
        p = p * r + 8.3334519073e-3f;                                                          \
        p = p * r + 4.1665795894e-2f;                                                          \
        p = p * r + 1.6666665459e-1f;                                                          \
        p = p * r + 5.0000001201e-1f;                                                          \
        p = p * r2 + r + 1.0f;                                                                 \
        int32_t bits = ((int32_t)n + 127) << 23; /* 2^n, n in [-126, 128] */                   \
        float scale;                                                                           \
        memcpy(&scale, &bits, sizeof scale);                                                   \
        return p * scale;                                                                      \
    }

/* log for positive normal float32 as plain arithmetic (Cephes' logf: mantissa in
 * [sqrt(1/2), sqrt(2)) from the exponent bits, degree-8 polynomial), so that a loop over it
 * vectorises. Relative error about 1e-7. */
static inline __attribute__((always_inline)) float log_poly(float x) {
    int32_t bits;
    memcpy(&bits, &x, sizeof bits);
    float e = (float)(((bits >> 23) & 0xff) - 126); /* x = m 2^e, m in [0.5, 1) */
    bits = (bits & 0x807fffff) | 0x3f000000;
    float m;
    memcpy(&m, &bits, sizeof m);
    int low = m < 0.707106781186547524f;
    e = low ? e - 1.0f : e;
    m = low ? m + m - 1.0f : m - 1.0f;
    float z = m * m;
    float y = 7.0376836292e-2f;
    y = y * m - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z;
    y = y + -2.12194440e-4f * e;
    y = y + -0.5f * z;
    return (m + y) + 0.693359375f * e;
}

static inline __attribute__((always_inline)) float floor_by_hand(float x) {
    float n = (float)(int32_t)x;
    return n > x ? n - 1.0f : n;
}

DEFINE_EXP(exp_sse2, floor_by_hand)
DEFINE_EXP(exp_floor, __builtin_floorf)

/* The sum of 16 lanes as a tree of halves: lane l plus lane l + 8, then l plus l + 4, then
 * (0 + 2) + (1 + 3). Each halving is one add of whole vectors (GCC's vector types): written
 * lane by lane, the compiler took the lanes apart into about 35 scalar adds and shuffles,
 * which cost more than the two multiply-adds of a 32-float dot product. */
typedef float Lanes8 __attribute__((vector_size(32)));
typedef float Lanes4 __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) float sum_lanes(const float *restrict lane) {
    Lanes8 low, high;
    memcpy(&low, lane, sizeof low);
    memcpy(&high, lane + 8, sizeof high);
    low += high;
    Lanes4 first, second;
    memcpy(&first, &low, sizeof first);
    memcpy(&second, (const float *)&low + 4, sizeof second);
    first += second;
    return (first[0] + first[2]) + (first[1] + first[3]);
}

/* sum_c a[c] b[c] over n floats, summed as 16 independent lanes then a tree of halves
 * (sum_lanes), so that the loop vectorises without reassociating a single sum (the compiler
 * may not). Shared by the kernels that take dot products of rows (gmm_step.c,
 * gmm_predict.h, gmm_bank_head.h); instantiated per build (DEFINE_DOT(name, target
 * attribute)). */
#define DEFINE_DOT(NAME, TARGET)                                                               \
    TARGET static inline float NAME(const float *restrict a, const float *restrict b,          \
                                    ptrdiff_t n) {                                             \
        float lane[16] = {0};                                                                  \
        ptrdiff_t c = 0;                                                                       \
        for (; c + 16 <= n; c += 16)                                                           \
            for (int l = 0; l < 16; l++) lane[l] += a[c + l] * b[c + l];                       \
        float s = sum_lanes(lane);                                                             \
        for (; c < n; c++) s += a[c] * b[c];                                                   \
        return s;                                                                              \
    }

/* A kernel compiled in several builds, chosen at import by the CPU (fastest first). */
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86_BUILDS 1
#define TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))

static inline int cpu_runs_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static inline int cpu_runs_avx512(void) {
    return cpu_runs_avx2() && __builtin_cpu_supports("avx512f");
}
#endif

#endif
