# The activations' opcodes for the replay VM (seqjit.graph._native_vm): ``include "activations/_native.pxi"``
# after linear/_native.pxi, which declares the per-instruction-set row loops of native_act.h.


cdef inline int run_act(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    sj_act_row(<float*>c.p[0], NULL, <float*>c.p[1], c.i[0], <int>c.i[1])
    return ERR_NONE


cdef inline int run_mul(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    sj_mul_row(<float*>c.p[0], <float*>c.p[1], <float*>c.p[2], c.i[0])
    return ERR_NONE
