/* Eigen's rational tanh for float32 (NaN passes through), shared by the Cython kernels that need a
   vectorisable tanh inside their C loops: #include "../_sj_tanhf.h" from a family's inline C. */
#ifndef SJ_TANHF_H
#define SJ_TANHF_H
static inline float sj_tanhf(float x) {
    const float c = 7.90531110763549805f;
    x = x < -c ? -c : (x > c ? c : x);
    float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return x * p / q;
}
#endif
