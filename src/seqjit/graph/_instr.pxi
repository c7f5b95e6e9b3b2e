# The native VM's instruction and error codes (seqjit.graph._native_vm), included before the kernel
# families so that each family's ``run_<opcode>`` (the body the VM's generated dispatch calls) can
# read its instruction.
#
# Every run_<opcode> has one signature: ``cdef inline int run_<opcode>(Instr* c, int nt, bint team,
# Py_ssize_t* err) noexcept nogil``: ``nt`` the threads the VM gives the instruction (1, the run's
# OpenMP threads, or TEAM: the team of two), ``team`` whether this run holds the team of two, ``err``
# where it writes an error's value (err[0], for every error) and limit (err[1], for ERR_STEP); it returns
# an error code (ERR_NONE when it ran). It reads its operands by name: ``c.p[LAYER_NORM_P_X]``, the
# index constants of _operands.pxi, generated from seqjit.graph.opcodes.OPERANDS (docs/native_vm.md).

# error codes of a run
cdef enum:
    ERR_NONE = 0
    ERR_ID = 1        # a token id outside the table
    ERR_STEP = 2      # the step outside the position table or the cache
    ERR_PYTHON = 3    # a Python callback raised
    ERR_NAN = 4       # a decoding loop's logits hold NaN (seqjit.errors.NonFiniteLogits)
    ERR_NONE_LEFT = 5 # a decoding loop's processed row is -inf everywhere (seqjit.errors.NothingGenerable)

DEF NPTR = 12
DEF NINT = 24
DEF NFLT = 4

cdef struct Instr:
    int op
    int threads       # 1: the calling thread only; 0: the run's thread count
    void* p[NPTR]
    Py_ssize_t i[NINT]
    double f[NFLT]
