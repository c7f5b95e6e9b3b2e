# Native Bahdanau attention for the replay VM: ``include "additive_attention/_native.pxi"`` after
# linear/_native.pxi and attention/_native.pxi (scratch: B * A + A floats). score[s] = v . tanh(W_q query + keys_proj[s]) over the first lengths[b] keys,
# softmax, context = weights @ keys (masked weights are 0; a row with no key gets all zeros).
from libc.stdint cimport int64_t

cdef extern from "additive_attention/native_scores.h" nogil:
    void sj_additive_scores(const float *qp, const float *kp, const float *v, int A, int S, float *tmp,
                            float *score)


cdef void native_additive_attention(const float* query, Py_ssize_t ldq, const float* keys_proj,
                                    const float* keys, const float* w_q, const float* v,
                                    const int64_t* lengths, float* context, float* weights,
                                    int B, int S, int A, int Dq, int Dk, float* scratch, int nthreads,
                                    int layout) noexcept nogil:
    cdef float* qp = scratch
    cdef float* tmp = scratch + <Py_ssize_t>B * A
    cdef int b, s, a, d, vis
    cdef float top, total, inv, w
    cdef const float* kr
    cdef float* wr
    cdef float* cr
    native_linear(query, ldq, B, Dq, w_q, A, layout, NULL, qp, A, _NONE, nthreads)
    for b in range(B):
        vis = S
        if lengths != NULL and lengths[b] < vis:
            vis = <int>lengths[b]
        if vis < 0:
            vis = 0
        wr = weights + b * S
        cr = context + b * Dk
        for s in range(S):
            wr[s] = 0
        for d in range(Dk):
            cr[d] = 0
        if vis == 0:
            continue
        sj_additive_scores(qp + b * A, keys_proj + <Py_ssize_t>b * S * A, v, A, vis, tmp, wr)
        top = -3.4e38
        for s in range(vis):
            if wr[s] > top:
                top = wr[s]
        total = 0
        for s in range(vis):
            wr[s] = exp_f32(wr[s] - top)
            total += wr[s]
        inv = <float>1.0 / total
        for s in range(vis):
            wr[s] = wr[s] * inv
            w = wr[s]
            kr = keys + (<Py_ssize_t>b * S + s) * Dk
            for d in range(Dk):
                cr[d] += w * kr[d]


cdef inline int run_additive(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    native_additive_attention(<float*>c.p[ADDITIVE_P_QUERY], c.i[ADDITIVE_I_LDQ],
                              <float*>c.p[ADDITIVE_P_KEYS_PROJ], <float*>c.p[ADDITIVE_P_KEYS],
                              <float*>c.p[ADDITIVE_P_W_Q], <float*>c.p[ADDITIVE_P_V],
                              <int64_t*>c.p[ADDITIVE_P_LENGTHS], <float*>c.p[ADDITIVE_P_CONTEXT],
                              <float*>c.p[ADDITIVE_P_WEIGHTS], <int>c.i[ADDITIVE_I_BATCH], <int>c.i[ADDITIVE_I_S],
                              <int>c.i[ADDITIVE_I_A], <int>c.i[ADDITIVE_I_DQ], <int>c.i[ADDITIVE_I_DK],
                              <float*>c.p[ADDITIVE_P_SCRATCH], nt, <int>c.i[ADDITIVE_I_LAYOUT])
    return ERR_NONE
