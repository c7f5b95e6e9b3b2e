/* Body of native_scores.h, included once per instruction set with SJ_NAME(x) naming the variant. */

/* score[s] = v . tanh(qp + kp[s]) for s < S (kp rows A apart); tmp: A floats of scratch */
static void SJ_NAME(additive_scores)(const float *qp, const float *kp, const float *v, int A, int S,
                                     float *tmp, float *score) {
    for (int s = 0; s < S; s++) {
        const float *k = kp + (ptrdiff_t)s * A;
        for (int a = 0; a < A; a++) tmp[a] = sj_tanhf(qp[a] + k[a]);
        sj_v16 acc = {0};
        int a = 0;
        for (; a + 16 <= A; a += 16) acc += *(const sj_v16u *)(tmp + a) * *(const sj_v16u *)(v + a);
        float r = SJ_NAME(hsum)(acc);
        for (; a < A; a++) r += tmp[a] * v[a];
        score[s] = r;
    }
}
