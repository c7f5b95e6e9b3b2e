# The VM's own opcodes (seqjit.graph._native_vm): data movement and step bookkeeping with no kernel
# family, one ``run_<opcode>`` each with the signature of _instr.pxi. OP_PYCALL (a Python callback,
# with the GIL) is run by Program itself.


cdef inline void _copy4(const char* src, char* dst, const Py_ssize_t* i) noexcept nogil:
    """Strided copy: i[0] ndim (<= 4, axes padded to 4 in front), i[1:5] shape, i[5:9] source
    strides, i[9:13] destination strides (in elements), i[13] item size."""
    cdef Py_ssize_t a, b, c, d
    cdef Py_ssize_t isz = i[13]
    cdef const char* s
    cdef char* t
    for a in range(i[1]):
        for b in range(i[2]):
            for c in range(i[3]):
                s = src + (a * i[5] + b * i[6] + c * i[7]) * isz
                t = dst + (a * i[9] + b * i[10] + c * i[11]) * isz
                if i[8] == 1 and i[12] == 1:
                    memcpy(t, s, i[4] * isz)
                else:
                    for d in range(i[4]):
                        memcpy(t + d * i[12] * isz, s + d * i[8] * isz, isz)


cdef inline int run_copy(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    _copy4(<char*>c.p[0], <char*>c.p[1], c.i)
    return ERR_NONE


cdef inline int run_add(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(c.i[0]):
        (<float*>c.p[2])[j] = (<float*>c.p[0])[j] + (<float*>c.p[1])[j]
    return ERR_NONE


cdef inline int run_position_at(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """ERR_STEP (err: the step, its limit) for a step past the position table."""
    cdef Py_ssize_t t = (<int64_t*>c.p[1])[0]
    if t < 0 or t + c.i[1] >= c.i[2]:
        err[0], err[1] = t, c.i[2] - c.i[1]
        return ERR_STEP
    memcpy(c.p[2], <float*>c.p[0] + (t + c.i[1]) * c.i[0], c.i[0] * sizeof(float))
    return ERR_NONE


cdef inline int run_kv_write(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    """ERR_STEP (err: the step, its limit) for a step past the cache."""
    cdef Py_ssize_t t = (<int64_t*>c.p[2])[0], r
    if t < 0 or t >= c.i[2]:
        err[0], err[1] = t, c.i[2]
        return ERR_STEP
    for r in range(c.i[0] * c.i[1]):  # (b, h) pairs
        memcpy(<float*>c.p[0] + (r * c.i[2] + t) * c.i[3],
               <float*>c.p[1] + (r // c.i[1]) * c.i[4] + (r % c.i[1]) * c.i[5], c.i[3] * sizeof(float))
    return ERR_NONE


cdef inline int run_step_lengths(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    cdef Py_ssize_t t = (<int64_t*>c.p[0])[0] + 1, j
    for j in range(c.i[0]):
        (<int64_t*>c.p[1])[j] = t
    return ERR_NONE


cdef inline int run_select_first(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    memcpy(c.p[3], c.p[1] if (<int64_t*>c.p[0])[0] == 0 else c.p[2], c.i[0])
    return ERR_NONE
