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
