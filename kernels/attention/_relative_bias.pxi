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
    cdef Py_ssize_t t = (<int64_t*>c.p[2])[0] if c.i[4] else 0
    if t < 0 or t + c.i[2] - 1 > c.i[1]:
        err[0], err[1] = t, c.i[1] + 2 - c.i[2]
        return ERR_STEP
    native_relative_bias(<float*>c.p[0], <int>c.i[0], <int64_t*>c.p[1], c.i[1], t, <int>c.i[2],
                         <int>c.i[3], <float*>c.p[3])
    return ERR_NONE
