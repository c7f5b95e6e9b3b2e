# Native embedding for the replay VM: ``include "embedding/_native.pxi"``.
from libc.stdint cimport int64_t


cdef Py_ssize_t native_embedding(const int64_t* ids, Py_ssize_t n, const float* table, Py_ssize_t V, int D,
                                 float scale, const float* positions, Py_ssize_t L, float* out) noexcept nogil:
    """out[i] = table[ids[i]] * scale (+ positions[i % L]); returns -1, or the index of the first id
    outside [0, V) (nothing is read for it)."""
    cdef Py_ssize_t i, t
    cdef int d
    cdef const float* row
    cdef const float* pos
    cdef float* o
    for i in range(n):
        t = ids[i]
        if t < 0 or t >= V:
            return i
        row = table + t * D
        o = out + i * D
        if positions != NULL:
            pos = positions + (i % L) * D
            for d in range(D):
                o[d] = row[d] * scale + pos[d]
        else:
            for d in range(D):
                o[d] = row[d] * scale
    return -1


cdef Py_ssize_t native_embedding_int8(const int64_t* ids, Py_ssize_t n, const signed char* table,
                                      const float* row_scale, Py_ssize_t V, int D, float scale,
                                      const float* positions, Py_ssize_t L, float* out) noexcept nogil:
    """out[i] = table[ids[i]] * (row_scale[ids[i]] * scale) (+ positions[i % L]), in float32 (the
    NumPy glue of the embedding_int8 op); returns -1, or the index of the first id outside [0, V)."""
    cdef Py_ssize_t i, t
    cdef int d
    cdef const signed char* row
    cdef const float* pos
    cdef float* o
    cdef float s
    for i in range(n):
        t = ids[i]
        if t < 0 or t >= V:
            return i
        row = table + t * D
        s = row_scale[t] * scale
        o = out + i * D
        if positions != NULL:
            pos = positions + (i % L) * D
            for d in range(D):
                o[d] = <float>row[d] * s + pos[d]
        else:
            for d in range(D):
                o[d] = <float>row[d] * s
    return -1


cdef inline int run_embedding(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """ERR_ID (err[0]: the id) for an id outside the table."""
    cdef Py_ssize_t r = native_embedding(<int64_t*>c.p[EMBEDDING_P_IDS], c.i[EMBEDDING_I_N],
                                         <float*>c.p[EMBEDDING_P_TABLE], c.i[EMBEDDING_I_VOCAB],
                                         <int>c.i[EMBEDDING_I_D], <float>c.f[EMBEDDING_F_SCALE],
                                         <float*>c.p[EMBEDDING_P_POSITIONS], c.i[EMBEDDING_I_LENGTH],
                                         <float*>c.p[EMBEDDING_P_Y])
    if r >= 0:
        err[0] = (<int64_t*>c.p[EMBEDDING_P_IDS])[r]
        return ERR_ID
    return ERR_NONE


cdef inline int run_embedding_int8(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """ERR_ID (err[0]: the id) for an id outside the table."""
    cdef Py_ssize_t r = native_embedding_int8(<int64_t*>c.p[EMBEDDING_INT8_P_IDS], c.i[EMBEDDING_INT8_I_N],
                                              <signed char*>c.p[EMBEDDING_INT8_P_TABLE],
                                              <float*>c.p[EMBEDDING_INT8_P_ROW_SCALE],
                                              c.i[EMBEDDING_INT8_I_VOCAB], <int>c.i[EMBEDDING_INT8_I_D],
                                              <float>c.f[EMBEDDING_INT8_F_SCALE],
                                              <float*>c.p[EMBEDDING_INT8_P_POSITIONS],
                                              c.i[EMBEDDING_INT8_I_LENGTH], <float*>c.p[EMBEDDING_INT8_P_Y])
    if r >= 0:
        err[0] = (<int64_t*>c.p[EMBEDDING_INT8_P_IDS])[r]
        return ERR_ID
    return ERR_NONE
