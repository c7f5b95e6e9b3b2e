# T5's relative position bias for the replay VM: ``include "attention/_relative_bias.pxi"``.
# out[0, h, i, j] = table[bucket(j - (q0 + i)), h], the bucket of each relative position read from a
# table the lowering made with seqjit.graph.ops.t5_ops.relative_buckets (the float32 logarithm of
# transformers, so the bucket edges fall where they fall there); the gather runs here, per shape in
# the encoder and per step (q0 = the step) in the decoder.
from libc.stdint cimport int64_t


cdef void native_relative_bias(const float* table, int H, const int64_t* buckets, Py_ssize_t below,
                               Py_ssize_t q0, int Lq, int Lk, float* out) noexcept nogil:
    """``table`` [buckets, H]; ``buckets[r + below]``: the bucket of relative position r, for r in
    [-below, Lk); ``out`` [1, H, Lq, Lk] contiguous. The caller checked q0 + Lq - 1 <= below."""
    cdef int h, i, j
    cdef const int64_t* row
    cdef float* o
    for h in range(H):
        for i in range(Lq):
            row = buckets + below - q0 - i
            o = out + (<Py_ssize_t>h * Lq + i) * Lk
            for j in range(Lk):
                o[j] = table[row[j] * H + h]


cdef inline int run_relative_bias(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """OP_RELATIVE_BIAS; i: H, below, Lq, Lk, whether q0 is the step (p[2]). ERR_STEP (err: the
    step, its limit) for a step past the buckets."""
    cdef Py_ssize_t t = (<int64_t*>c.p[RELATIVE_BIAS_P_STEP])[0] if c.i[RELATIVE_BIAS_I_HAS_STEP] else 0
    if t < 0 or t + c.i[RELATIVE_BIAS_I_LQ] - 1 > c.i[RELATIVE_BIAS_I_BELOW]:
        err[0], err[1] = t, c.i[RELATIVE_BIAS_I_BELOW] + 2 - c.i[RELATIVE_BIAS_I_LQ]
        return ERR_STEP
    native_relative_bias(<float*>c.p[RELATIVE_BIAS_P_TABLE], <int>c.i[RELATIVE_BIAS_I_HEADS],
                         <int64_t*>c.p[RELATIVE_BIAS_P_BUCKETS], c.i[RELATIVE_BIAS_I_BELOW], t,
                         <int>c.i[RELATIVE_BIAS_I_LQ], <int>c.i[RELATIVE_BIAS_I_LK],
                         <float*>c.p[RELATIVE_BIAS_P_Y])
    return ERR_NONE
