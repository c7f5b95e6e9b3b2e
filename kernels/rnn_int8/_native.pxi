# The int8 recurrence for the replay VM (seqjit.graph._native_vm): ``include "rnn_int8/_native.pxi"``
# after linear_int8/_native.pxi (the _qgemm.h declarations and _native_qisa). _recurrence.pxi is shared
# with cython_cpu.pyx; the VM's opcode is here.
include "rnn_int8/_recurrence.pxi"


cdef inline int run_rnn_int8(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    int8_recurrence(c.i[RNN_INT8_I_LSTM] != 0, <float*>c.p[RNN_INT8_P_XG], c.i[RNN_INT8_I_LDX],
                    <int>c.i[RNN_INT8_I_BATCH], <int>c.i[RNN_INT8_I_STEPS], <int>c.i[RNN_INT8_I_HIDDEN],
                    <int8_t*>c.p[RNN_INT8_P_W], <float*>c.p[RNN_INT8_P_SCALE], <float*>c.p[RNN_INT8_P_BIAS],
                    <float*>c.p[RNN_INT8_P_H0], <float*>c.p[RNN_INT8_P_C0], <int64_t*>c.p[RNN_INT8_P_LENGTHS],
                    c.i[RNN_INT8_I_REVERSE] != 0, <float*>c.p[RNN_INT8_P_OUT], <float*>c.p[RNN_INT8_P_H_N],
                    <float*>c.p[RNN_INT8_P_C_N], <float*>c.p[RNN_INT8_P_SCRATCH], <int8_t*>c.p[RNN_INT8_P_QH],
                    _native_qisa, nt, NULL)
    return ERR_NONE
