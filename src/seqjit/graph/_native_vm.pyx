# cython: language_level=3
"""The native replay VM: a plan lowered to a flat list of instructions run in one nogil C loop.

An instruction (``_instr.pxi``) is an op code, up to 12 pointers, 24 integers (shapes, strides in
elements, flags) and 4 floats, each named by its opcode's declaration in seqjit.graph.opcodes
(``OPERANDS``; read by index constants setup.py generates, ``_operands.pxi``), run by its opcode's
``run_<opcode>`` in the kernel family's ``_native.pxi`` through the dispatch setup.py generates
(``_opcodes.pxi``); ``Program.add`` refuses operand counts other than the declaration's;
:mod:`seqjit.graph.lowering` builds them from a :class:`~seqjit.graph.executor.Plan` (shapes,
buffers and views are fixed there, and so every argument is checked once, at lowering).
Replay does no checks and allocates nothing; the few that depend on run-time values (token ids in
range, the step inside the position table or cache) set an error that :meth:`Program.run` raises.

Pointers into a graph input are patched when the caller passes an array at another address
(``set_inputs``): a few writes, not a re-lowering. Nodes the VM has no kernel for run as Python
callbacks (``OP_PYCALL``: the GIL is taken for them only).

:func:`greedy` runs a whole greedy decode (step program, argmax under the banned tokens, feeding
the token back, writing the recurrent state back) without returning to Python.
"""
cimport numpy as cnp
import numpy as np
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memset
from libc.math cimport INFINITY, log

include "_instr.pxi"  # the instruction and error codes every run_<opcode> reads and returns
# the index of every opcode's named operands (LAYER_NORM_P_X...): generated from seqjit.graph.opcodes
# (setup.py), read by the run_<opcode> functions
include "_operands.pxi"
# the kernel families: each defines the run_<opcode> of its opcodes (dispatched by _opcodes.pxi)
include "linear/_native.pxi"
include "activations/_native.pxi"
include "layer_norm/_native.pxi"
include "embedding/_native.pxi"
include "attention/_native.pxi"
include "attention/_relative_bias.pxi"
include "rnn/_native_cells.pxi"
include "rnn/_native_sequence.pxi"
include "additive_attention/_native.pxi"
include "linear_int8/_native.pxi"
include "linear_half/_native.pxi"
include "rnn_int8/_native.pxi"
include "_vm_ops.pxi"  # the VM's own opcodes (copy, add, step bookkeeping)

cdef extern from "sampling/native_argmax.h" nogil:
    # numpy.argmax of a float32 row, vectorised per instruction set; -1 when the row holds NaN
    Py_ssize_t sj_argmax_row(const float *x, Py_ssize_t n)

cnp.import_array()

# op codes, the dispatch to each run_<opcode> and the team policy: generated from seqjit.graph.opcodes
# (setup.py); a build from another list refuses to load
include "_opcodes.pxi"

from seqjit.graph.opcodes import OPCODES as _OPCODES, OPERANDS as _OPERANDS

if tuple(BUILT_OPCODES) != tuple(_OPCODES) or BUILT_OPERANDS != _OPERANDS:
    raise ImportError("seqjit.graph._native_vm was built from other opcodes or operands than seqjit.graph.opcodes; "
                      "rebuild it: python setup.py build_ext --inplace")

#: opcode number -> (name, pointers, integers, floats) it declares (index 0: none)
_COUNTS = [None] + [(name, *map(len, BUILT_OPERANDS[name])) for name in BUILT_OPCODES]

cdef class Program:
    """A lowered plan; see the module docstring."""

    cdef Instr* code
    cdef int n, cap
    cdef list refs, callbacks, patches
    cdef int n_inputs
    cdef Py_ssize_t* bound
    cdef Py_ssize_t* patch_instr
    cdef int* patch_ptr
    cdef Py_ssize_t* patch_off
    cdef Py_ssize_t* patch_start
    cdef readonly int err, err_instr
    cdef readonly Py_ssize_t err_value, err_limit
    cdef object exc
    cdef int team_nt        # what a team-splittable instruction runs with: TEAM while held, else 1
    cdef readonly int team_nodes  # instructions planned for the team (threads == 2)
    # instructions planned for the run's threads (threads == 0) that the team runs when a run has
    # exactly 2: the team splits such a product faster than OpenMP does, so a program made only of
    # them (a one-op program, a 64-row decode step) still holds the team
    cdef readonly int wide_team_nodes
    # whether the team pays for this program, measured: running means of its run time with the team
    # and alone (seconds), and its runs at 2+ threads (every 8th tries the other way)
    cdef readonly double mean_team, mean_solo
    cdef long long held_runs
    cdef bint team_warm     # the next run completes a team try: with the team, timed

    def __cinit__(self):
        self.team_nt = 1
        self.team_nodes = self.wide_team_nodes = 0
        self.mean_team = self.mean_solo = 0
        self.held_runs = 0
        self.team_warm = 0
        self.code = NULL
        self.n = self.cap = 0
        self.bound = NULL
        self.patch_instr = NULL
        self.patch_ptr = NULL
        self.patch_off = NULL
        self.patch_start = NULL

    def __init__(self, int n_inputs):
        self.refs, self.callbacks = [], []
        self.patches = [[] for _ in range(n_inputs)]
        self.n_inputs = n_inputs

    def __dealloc__(self):
        free(self.code)
        free(self.bound)
        free(self.patch_instr)
        free(self.patch_ptr)
        free(self.patch_off)
        free(self.patch_start)

    def __len__(self):
        return self.n

    def add(self, int op, ptrs=(), ints=(), floats=(), int threads=1, inputs=(), keep=()):
        """Append an instruction. ``ptrs``: addresses (0 for NULL); ``inputs``: (pointer index,
        input slot, byte offset) for pointers into a graph input (patched by ``set_inputs``);
        ``keep``: objects to keep alive with the program. Returns its index."""
        cdef Instr* ins
        if not 0 < op < len(_COUNTS):
            raise ValueError(f"no opcode {op}")
        name, n_p, n_i, n_f = _COUNTS[op]
        if (len(ptrs), len(ints), len(floats)) != (n_p, n_i, n_f):
            raise ValueError(f"opcode {name!r} takes {n_p} pointers, {n_i} integers and {n_f} floats "
                             f"(seqjit.graph.opcodes.OPERANDS), got {len(ptrs)}, {len(ints)} and {len(floats)}")
        if self.n == self.cap:
            self.cap = max(16, 2 * self.cap)
            ins = <Instr*>realloc(self.code, self.cap * sizeof(Instr))
            if ins == NULL:
                raise MemoryError()
            self.code = ins
        ins = &self.code[self.n]
        memset(ins, 0, sizeof(Instr))
        ins.op, ins.threads = op, threads
        if threads == 2:
            self.team_nodes += 1
        for k, p in enumerate(ptrs):
            ins.p[k] = <void*><Py_ssize_t>p
        for k, v in enumerate(ints):
            ins.i[k] = v
        for k, v in enumerate(floats):
            ins.f[k] = v
        for k, slot, offset in inputs:
            self.patches[slot].append((self.n, k, offset))
        if threads == 0 and takes_team(ins):  # after its operands: takes_team reads them
            self.wide_team_nodes += 1
        self.refs.extend(keep)
        self.n += 1
        return self.n - 1

    def add_callback(self, fn):
        """Append an OP_PYCALL instruction calling ``fn()`` (with the GIL)."""
        self.callbacks.append(fn)
        return self.add(OP_PYCALL, ints=(len(self.callbacks) - 1,))

    def finish(self, initial_addresses):
        """Freeze the patch table; ``initial_addresses``: each input's address at lowering."""
        cdef Py_ssize_t total = sum(len(p) for p in self.patches), j = 0
        cdef int s
        self.bound = <Py_ssize_t*>malloc((self.n_inputs + 1) * sizeof(Py_ssize_t))
        self.patch_start = <Py_ssize_t*>malloc((self.n_inputs + 1) * sizeof(Py_ssize_t))
        self.patch_instr = <Py_ssize_t*>malloc((total + 1) * sizeof(Py_ssize_t))
        self.patch_ptr = <int*>malloc((total + 1) * sizeof(int))
        self.patch_off = <Py_ssize_t*>malloc((total + 1) * sizeof(Py_ssize_t))
        if not (self.bound and self.patch_start and self.patch_instr and self.patch_ptr and self.patch_off):
            raise MemoryError()
        for s in range(self.n_inputs):
            self.bound[s] = initial_addresses[s]
            self.patch_start[s] = j
            for ins, k, off in self.patches[s]:
                self.patch_instr[j], self.patch_ptr[j], self.patch_off[j] = ins, k, off
                j += 1
        self.patch_start[self.n_inputs] = j

    cpdef int set_inputs(self, tuple arrays) except -1:
        """Point every instruction reading graph input ``s`` at ``arrays[s]`` (C-contiguous, of
        the signature the program was lowered for: the caller checked that)."""
        cdef int s
        cdef Py_ssize_t j, addr
        cdef cnp.ndarray a
        for s in range(self.n_inputs):
            a = <cnp.ndarray>arrays[s]
            addr = <Py_ssize_t>cnp.PyArray_DATA(a)
            if addr == self.bound[s]:
                continue
            for j in range(self.patch_start[s], self.patch_start[s + 1]):
                self.code[self.patch_instr[j]].p[self.patch_ptr[j]] = <void*>(addr + self.patch_off[j])
            self.bound[s] = addr
        return 0

    def run(self, int nthreads=1, int team_mode=-1):
        """Run every instruction; raises on the run-time errors of the module docstring. ``team_mode``
        (benchmarks): -1 as _hold_team chooses, 1 with the team of two, 0 alone."""
        cdef int rc, team
        with nogil:
            team = self._hold_team(nthreads) if team_mode < 0 else self._force_team(nthreads, team_mode)
            rc = self._run_held(nthreads, team)
            self._free_team(team)
        if rc:
            self.raise_error()

    cdef int _hold_team(self, int nthreads) noexcept nogil:
        """How this run goes: 1 with the team of two (native_team.h, taken here), timed, 3 with the
        team untimed, 2 alone by choice (timed, to compare), 0 alone (1 thread, nothing planned for
        the team, or the team is busy or backing off). With 2+ threads the program uses whichever of
        team and alone has been faster for it (a second core shared with other tenants of the host,
        or the two cores being threads of one, can make the split slower than one thread), trying
        the other way every 8th run; the first run goes alone. Alone, the worker is not woken, so it
        sleeps by the time a short program tries the team again: a team try is two runs, the first
        untimed (waking the worker and its cold caches would make the team look slower than it is)."""
        cdef int team, warm = 0
        sj_team_enter()
        if not self._team_pays(nthreads):
            return 0
        self.held_runs += 1
        if self.team_warm:
            self.team_warm = 0
            team, warm = 1, 1
        elif self.mean_solo == 0:
            team = 0
        elif self.mean_team == 0:
            team = 1
        else:
            team = self.mean_team <= self.mean_solo
            if self.held_runs % 8 == 0:
                team = not team
        if not team:
            return 2
        if not sj_team_acquire():
            return 0
        self.team_nt = TEAM
        if not warm and (self.mean_team == 0 or self.mean_team > self.mean_solo):
            self.team_warm = 1  # a team try: this run wakes the worker, the next one is timed
            return 3
        return 1

    cdef inline bint _team_pays(self, int nthreads) noexcept nogil:
        """Whether a run of ``nthreads`` has instructions for the team: planned for it, or, at exactly 2
        threads, planned for the run's threads and taken by the team (_exec)."""
        return nthreads >= 2 and (self.team_nodes > 0 or (nthreads == 2 and self.wide_team_nodes > 0))

    cdef int _force_team(self, int nthreads, int want) noexcept nogil:
        """_hold_team's mode without its choice: with the team when ``want`` (and it can be taken)."""
        sj_team_enter()
        if want and self._team_pays(nthreads) and sj_team_acquire():
            self.team_nt = TEAM
            return 1
        return 0

    cdef int _run_held(self, int nthreads, int mode) noexcept nogil:
        """``_run`` in ``mode`` (see _hold_team), timed into the program's means when it compares."""
        cdef int rc
        cdef timespec t0, t1
        cdef double dt
        if mode == 0 or mode == 3:
            return self._run(nthreads)
        clock_gettime(CLOCK_MONOTONIC, &t0)
        rc = self._run(nthreads)
        clock_gettime(CLOCK_MONOTONIC, &t1)
        dt = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9
        if mode == 1:
            if sj_team_degraded():  # the hold went serial: not a measure of the team
                return rc
            self.mean_team = dt if self.mean_team == 0 else 0.75 * self.mean_team + 0.25 * dt
        else:
            self.mean_solo = dt if self.mean_solo == 0 else 0.75 * self.mean_solo + 0.25 * dt
        return rc

    cdef void _free_team(self, int held) noexcept nogil:
        if held == 1 or held == 3:
            self.team_nt = 1
            sj_team_release()
        sj_team_leave()

    def raise_error(self):
        cdef Instr* at = &self.code[self.err_instr]
        if self.err == ERR_PYTHON:
            exc, self.exc = self.exc, None
            raise exc
        if self.err == ERR_ID:  # the message of the embedding kernels (kernels/embedding/spec.py)
            vocab = at.i[EMBEDDING_I_VOCAB] if at.op == OP_EMBEDDING else at.i[EMBEDDING_INT8_I_VOCAB]
            raise ValueError(f"ids must lie in [0, {vocab}) (V = table.shape[0]), got {self.err_value}")
        if self.err == ERR_STEP:  # the message of the Python replay (layout_ops._step_index)
            what = "max_positions of the model" if at.op == OP_POSITION_AT \
                else "the decoder state's max_length"
            raise ValueError(f"step must lie in [0, {self.err_limit}) ({what}), got {self.err_value}")
        raise RuntimeError(f"native replay failed with code {self.err}")

    cdef int _callback(self, Py_ssize_t k) noexcept with gil:
        try:
            self.callbacks[k]()
        except BaseException as exc:  # noqa: BLE001 - re-raised by raise_error
            self.exc = exc
            return ERR_PYTHON
        return 0

    def run_timed(self, int nthreads=1, int team_mode=-1):
        """Run every instruction; returns the seconds each took (a list), for the profiler
        (``team_mode``: as in ``run``)."""
        cdef int pc, rc = 0
        cdef double[::1] times = np.zeros(self.n)
        cdef timespec t0, t1
        cdef int team
        with nogil:
            team = self._hold_team(nthreads) if team_mode < 0 else self._force_team(nthreads, team_mode)
            for pc in range(self.n):
                clock_gettime(CLOCK_MONOTONIC, &t0)
                rc = self._exec(pc, nthreads)
                clock_gettime(CLOCK_MONOTONIC, &t1)
                times[pc] = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9
                if rc:
                    break
            self._free_team(team)
        if rc:
            self.raise_error()
        return list(times)

    cdef int _run(self, int nthreads) noexcept nogil:
        cdef int pc, rc
        for pc in range(self.n):
            rc = self._exec(pc, nthreads)
            if rc:
                return rc
        return ERR_NONE

    cdef int _exec(self, int pc, int nthreads) noexcept nogil:
        cdef int nt, rc
        cdef Instr* c = &self.code[pc]
        cdef Py_ssize_t err[2]
        # threads: 1 the calling thread; 2 planned for the team (split in two while this run holds
        # it); 0 the run's threads (OpenMP), less the core the team's worker spins on while the run
        # holds it (with 2 threads: the team itself, for the ops whose products take TEAM)
        if c.threads == 1:
            nt = 1
        elif c.threads == 2:
            nt = self.team_nt
        elif self.team_nt != TEAM:
            nt = nthreads
        elif nthreads == 2 and takes_team(c):
            nt = TEAM
        else:
            nt = 1 if nthreads <= 2 else nthreads - 1
        if c.op == OP_PYCALL:
            rc = self._callback(c.i[PYCALL_I_CALLBACK])
            if rc:
                self.err, self.err_instr = rc, pc
            return rc
        err[0] = err[1] = 0  # written by run_<opcode> on an error only
        rc = dispatch(c, nt, self.team_nt == TEAM, err)
        if rc:
            self.err, self.err_instr, self.err_value = rc, pc, err[0]
            if rc == ERR_STEP:
                self.err_limit = err[1]
        return rc


def greedy(Program step, Program writeback, cnp.ndarray logits, cnp.ndarray prev, cnp.ndarray stepv,
           cnp.ndarray ids, cnp.ndarray lengths, cnp.ndarray scores, cnp.ndarray banned,
           int eos, int min_length, int start, int nthreads, int stop_alive=0, cnp.ndarray forced=None):
    """Greedy decoding to the end: runs ``step`` (which reads ``prev`` [B] and ``stepv`` [], writes
    ``logits`` [B, V]) then ``writeback`` for t = start .. T-1 (T = ids.shape[1]); row b's token t
    goes to ``ids[b, t]``; ``lengths[b]`` becomes the tokens generated for it (its end token
    included), ``scores[b]`` the sum of their log-probabilities when ``scores`` is not empty.
    ``banned``: tokens never chosen (int64); the end token is banned too while t < min_length.
    Rows run until every row has its end token or T tokens (finished rows keep computing), or until
    at most ``stop_alive`` rows are still running (the caller then compacts the batch and calls
    again from the returned step). ``forced`` (None or int64 [B, P]): row b's token at step t < P is
    ``forced[b, t]`` where that is not -1 (a ``target_prefix``: chosen whatever the logits, adding 0 to
    the score, never ending the row). Returns the next step."""
    cdef int B = <int>logits.shape[0], V = <int>logits.shape[1], T = <int>ids.shape[1]
    cdef int fw = _forced_width(forced, B, V)
    cdef int64_t* fp = <int64_t*>cnp.PyArray_DATA(forced) if fw else NULL
    cdef Py_ssize_t ld = logits.strides[0] // 4
    cdef float* lg = <float*>cnp.PyArray_DATA(logits)
    cdef int64_t* pv = <int64_t*>cnp.PyArray_DATA(prev)
    cdef int64_t* sv = <int64_t*>cnp.PyArray_DATA(stepv)
    cdef int64_t* out = <int64_t*>cnp.PyArray_DATA(ids)
    cdef int64_t* ln = <int64_t*>cnp.PyArray_DATA(lengths)
    cdef double* sc = <double*>cnp.PyArray_DATA(scores) if scores.shape[0] else NULL
    cdef int64_t* bn = <int64_t*>cnp.PyArray_DATA(banned)
    cdef int nb = <int>banned.shape[0]
    cdef int t, b, v, best, alive, rc = 0, k, nan_row = 0
    cdef float* row
    cdef float top, x
    cdef double total
    if logits.strides[1] != 4 or logits.dtype.num != cnp.NPY_FLOAT32:
        raise ValueError("logits must be float32 with contiguous rows")
    cdef int team
    with nogil:
        team = step._hold_team(nthreads)
        writeback.team_nt = step.team_nt
        for t in range(start, T):
            rc = step._run_held(nthreads, team)
            if rc:
                break
            alive = 0
            for b in range(B):
                if ln[b] > 0:
                    pv[b] = eos
                    continue
                row = lg + b * ld
                if t < fw and fp[b * fw + t] >= 0:  # a prefix token
                    if sj_argmax_row(row, V) < 0:
                        rc, nan_row = ERR_NAN, b
                        break
                    best = <int>fp[b * fw + t]
                    out[b * T + t] = best
                    pv[b] = best
                    if t + 1 == T:
                        ln[b] = t + 1
                    else:
                        alive += 1
                    continue
                for k in range(nb):  # a NaN anywhere in the row, a banned token's included, is an error
                    if row[bn[k]] != row[bn[k]]:
                        rc, nan_row = ERR_NAN, b
                    row[bn[k]] = -INFINITY
                if t < min_length:
                    if row[eos] != row[eos]:
                        rc, nan_row = ERR_NAN, b
                    row[eos] = -INFINITY
                best = <int>sj_argmax_row(row, V)  # the first maximum, as numpy.argmax; -1: a NaN
                if best < 0:
                    rc, nan_row = ERR_NAN, b
                elif row[best] == -INFINITY:  # every token banned: nothing to generate
                    rc, nan_row = ERR_NONE_LEFT, b
                if rc:
                    break
                if sc != NULL:
                    top = row[best]
                    if top == INFINITY:  # +inf entries share probability one (processors._certain)
                        total = 0
                        for v in range(V):
                            total += row[v] == INFINITY
                        sc[b] += -log(total)
                    else:  # row[best] is the max: its log-probability is -log(sum exp(row - max))
                        sc[b] += -sj_lse_f32(row, V, &top)
                out[b * T + t] = best
                pv[b] = best
                if best == eos or t + 1 == T:
                    ln[b] = t + 1
                else:
                    alive += 1
            if rc:
                break
            sv[0] += 1
            if writeback.n:
                rc = writeback._run(nthreads)
                if rc:
                    break
            if alive == 0 or alive <= stop_alive:
                break
        writeback.team_nt = 1
        step._free_team(team)
    if rc == ERR_NAN or rc == ERR_NONE_LEFT:
        raise_nan(t, nan_row, rc)
    if rc:
        (step if step.err else writeback).raise_error()
    return sv[0]


cdef int _forced_width(cnp.ndarray forced, int rows, int vocab) except -1:
    """The columns of ``forced`` (0 for None): a contiguous int64 [rows, P] array of token ids in
    [0, vocab) or -1 (not forced)."""
    if forced is None:
        return 0
    if forced.ndim != 2 or forced.shape[0] != rows or forced.dtype.num != cnp.NPY_INT64 \
            or not forced.flags.c_contiguous:
        raise ValueError(f"forced must be a contiguous int64 [{rows}, P] array, got {forced.dtype} "
                         f"{list((<object>forced).shape)}")
    if forced.size and (forced.min() < -1 or forced.max() >= vocab):
        raise ValueError(f"forced tokens must be -1 or lie in [0, {vocab})")
    return <int>forced.shape[1] if forced.size else 0


include "_native_sampling.pxi"

def raise_nan(int step, int row, int code=ERR_NAN):
    """Raise :class:`seqjit.errors.NonFiniteLogits` for row ``row`` of decoding step ``step``
    (``code`` ERR_NAN), or :class:`seqjit.errors.NothingGenerable` (ERR_NONE_LEFT: the row's
    processed scores are -inf for every token)."""
    from seqjit.errors import NonFiniteLogits, NothingGenerable

    if code == ERR_NONE_LEFT:
        raise NothingGenerable.at(step, row)
    raise NonFiniteLogits.at(step, row)


def team_counts():
    """(items published, parts the caller took back, long waits) of the team of two since start."""
    cdef long long out[3]
    sj_team_counts(out)
    return int(out[0]), int(out[1]), int(out[2])


def team_forgive():
    """Forget a back-off of the team of two (it steps back for 50 ms after a preempted worker), for
    tests that need it now."""
    sj_team_forgive()


_LINEAR_ISAS = ("base", "avx2", "avx512")


def linear_isa(name=None) -> str:
    """The instruction-set variant of the float linear kernels (native_gemv.h, native_packed.h):
    ``name`` ("avx512", "avx2", "base") forces it, clamped to what this CPU runs; None returns to
    the CPU's best. Returns the variant now in use (tests run every variant through it)."""
    global sj_gemv_isa
    cdef int best = sj_gemv_best()
    sj_gemv_isa = best if name is None else min(best, _LINEAR_ISAS.index(name))
    return _LINEAR_ISAS[sj_gemv_isa]


def half_isa() -> str:
    """The variant linear_half's kernels run now (native_half.h: the float GEMV's, lowered to "base"
    on a CPU without F16C)."""
    return _LINEAR_ISAS[sj_half_pick()]


def bf16_isa() -> str:
    """The variant linear_half's bf16 arithmetic runs now (native_bf16dot.h): "avx512bf16" (vdpbf16ps)
    where the CPU has AVX512-BF16 and the half kernels run AVX-512, else the portable path at the half
    kernels' variant ("avx512", "avx2", "base"), which gives the same numbers."""
    cdef int v = sj_bf16_pick()
    return "avx512bf16" if v == 3 else _LINEAR_ISAS[v]


def bf16_native(on=True) -> str:
    """Let the bf16 arithmetic use vdpbf16ps where the CPU has it (the default), or not (``on=False``:
    the portable path at the half kernels' variant), for tests that compare the two; returns
    :func:`bf16_isa`."""
    global sj_bf16_native_off
    sj_bf16_native_off = 0 if on else 1
    return bf16_isa()


def isa() -> str:
    """The instruction-set variant the VM's kernels run now ("avx512", "avx2", "base"): the CPU's
    best under $SEQJIT_ISA, or the one :func:`linear_isa` forced; changes nothing."""
    return _LINEAR_ISAS[sj_gemv_pick()]


def packed_scratch(on=True) -> None:
    """Let the packed linear (native_packed.h) pack x in its per-thread scratch (the default), or
    not (``on=False``: the path taken when no scratch can be allocated, one row block at a time
    on the stack), for tests of both paths."""
    global sj_pk_scratch_off
    sj_pk_scratch_off = 0 if on else 1


include "_native_beam.pxi"
