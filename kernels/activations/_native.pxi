# The activations' opcodes for the replay VM (seqjit.graph._native_vm): ``include "activations/_native.pxi"``
# after linear/_native.pxi, which declares the per-instruction-set row loops of native_act.h.


cdef inline int run_act(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    sj_act_row(<float*>c.p[ACT_P_X], NULL, <float*>c.p[ACT_P_Y], c.i[ACT_I_N], <int>c.i[ACT_I_ACT])
    return ERR_NONE


cdef inline int run_mul(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    sj_mul_row(<float*>c.p[MUL_P_A], <float*>c.p[MUL_P_B], <float*>c.p[MUL_P_Y], c.i[MUL_I_N])
    return ERR_NONE
