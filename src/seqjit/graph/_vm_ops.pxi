# The VM's own opcodes (seqjit.graph._native_vm): data movement and step bookkeeping with no kernel
# family, one ``run_<opcode>`` each with the signature of _instr.pxi, reading its operands by the index
# constants of _operands.pxi (seqjit.graph.opcodes.OPERANDS). OP_PYCALL (a Python callback, with the
# GIL) is run by Program itself.


cdef inline int run_copy(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """Strided copy of a shape of 4 axes (padded in front) from p[src] to p[dst], strides in elements."""
    cdef Py_ssize_t a, b, k, d
    cdef Py_ssize_t isz = c.i[COPY_I_ITEMSIZE]
    cdef Py_ssize_t s3 = c.i[COPY_I_SRC_STRIDE3], t3 = c.i[COPY_I_DST_STRIDE3]
    cdef const char* src = <const char*>c.p[COPY_P_SRC]
    cdef char* dst = <char*>c.p[COPY_P_DST]
    cdef const char* s
    cdef char* t
    for a in range(c.i[COPY_I_SHAPE0]):
        for b in range(c.i[COPY_I_SHAPE1]):
            for k in range(c.i[COPY_I_SHAPE2]):
                s = src + (a * c.i[COPY_I_SRC_STRIDE0] + b * c.i[COPY_I_SRC_STRIDE1]
                           + k * c.i[COPY_I_SRC_STRIDE2]) * isz
                t = dst + (a * c.i[COPY_I_DST_STRIDE0] + b * c.i[COPY_I_DST_STRIDE1]
                           + k * c.i[COPY_I_DST_STRIDE2]) * isz
                if s3 == 1 and t3 == 1:
                    memcpy(t, s, c.i[COPY_I_SHAPE3] * isz)
                else:
                    for d in range(c.i[COPY_I_SHAPE3]):
                        memcpy(t + d * t3 * isz, s + d * s3 * isz, isz)
    return ERR_NONE


cdef inline int run_add(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(c.i[ADD_I_N]):
        (<float*>c.p[ADD_P_Y])[j] = (<float*>c.p[ADD_P_A])[j] + (<float*>c.p[ADD_P_B])[j]
    return ERR_NONE


cdef inline int run_position_at(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """ERR_STEP (err: the step, its limit) for a step past the position table."""
    cdef Py_ssize_t t = (<int64_t*>c.p[POSITION_AT_P_STEP])[0]
    if t < 0 or t + c.i[POSITION_AT_I_OFFSET] >= c.i[POSITION_AT_I_ROWS]:
        err[0], err[1] = t, c.i[POSITION_AT_I_ROWS] - c.i[POSITION_AT_I_OFFSET]
        return ERR_STEP
    memcpy(c.p[POSITION_AT_P_Y],
           <float*>c.p[POSITION_AT_P_TABLE] + (t + c.i[POSITION_AT_I_OFFSET]) * c.i[POSITION_AT_I_D],
           c.i[POSITION_AT_I_D] * sizeof(float))
    return ERR_NONE


cdef inline int run_kv_write(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """ERR_STEP (err: the step, its limit) for a step past the cache."""
    cdef Py_ssize_t t = (<int64_t*>c.p[KV_WRITE_P_STEP])[0], r
    if t < 0 or t >= c.i[KV_WRITE_I_T]:
        err[0], err[1] = t, c.i[KV_WRITE_I_T]
        return ERR_STEP
    for r in range(c.i[KV_WRITE_I_B] * c.i[KV_WRITE_I_H]):  # (b, h) pairs
        memcpy(<float*>c.p[KV_WRITE_P_CACHE] + (r * c.i[KV_WRITE_I_T] + t) * c.i[KV_WRITE_I_D],
               <float*>c.p[KV_WRITE_P_X] + (r // c.i[KV_WRITE_I_H]) * c.i[KV_WRITE_I_X_SB]
               + (r % c.i[KV_WRITE_I_H]) * c.i[KV_WRITE_I_X_SH],
               c.i[KV_WRITE_I_D] * sizeof(float))
    return ERR_NONE


cdef inline int run_step_lengths(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    cdef Py_ssize_t t = (<int64_t*>c.p[STEP_LENGTHS_P_STEP])[0] + 1, j
    for j in range(c.i[STEP_LENGTHS_I_N]):
        (<int64_t*>c.p[STEP_LENGTHS_P_Y])[j] = t
    return ERR_NONE


cdef inline int run_select_first(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    memcpy(c.p[SELECT_FIRST_P_Y],
           c.p[SELECT_FIRST_P_FIRST] if (<int64_t*>c.p[SELECT_FIRST_P_STEP])[0] == 0 else c.p[SELECT_FIRST_P_REST],
           c.i[SELECT_FIRST_I_NBYTES])
    return ERR_NONE
