# The int8 recurrence for the replay VM (seqjit.graph._native_vm): ``include "rnn_int8/_native.pxi"``
# after linear_int8/_native.pxi (the _qgemm.h declarations and _native_qisa). _recurrence.pxi is shared
# with cython_cpu.pyx; the VM's opcode is here.
include "rnn_int8/_recurrence.pxi"


cdef inline int run_rnn_int8(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    int8_recurrence(c.i[0] != 0, <float*>c.p[0], c.i[4], <int>c.i[1], <int>c.i[2], <int>c.i[3],
                    <int8_t*>c.p[4], <float*>c.p[5], <float*>c.p[6], <float*>c.p[1], <float*>c.p[2],
                    <int64_t*>c.p[3], c.i[5] != 0, <float*>c.p[7], <float*>c.p[8], <float*>c.p[9],
                    <float*>c.p[10], <int8_t*>c.p[11], _native_qisa, nt, NULL)
    return ERR_NONE
