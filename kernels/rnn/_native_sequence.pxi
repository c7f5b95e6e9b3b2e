# Native multi-layer (bi)directional GRU / LSTM over a sequence for the replay VM:
# ``include "rnn/_native_sequence.pxi"`` after rnn/_native_cells.pxi. The semantics of
# reference.gru / reference.lstm (packed sequences by ``lengths``: row b runs over its first
# lengths[b] steps, the reverse direction from step lengths[b] - 1; outputs past a row's length are
# zero; the final state is the state after the row's own last step).
#
# Per layer and direction: the input projection of every step at once (one product over all rows),
# then per step the hidden projection of every row and the gate math of the rows still running.
# Row (b, t) of x / out is b * rb + t * rt (batch-first: rb = T, rt = 1; time-major: rb = 1,
# rt = B), rows ld elements apart; layers past the first read and write time-major scratch.
# ``wtab``: per (layer, direction), the addresses of w_ih, w_hh, b_ih, b_hh (0: no bias); the
# weights as PyTorch stores them (``layout`` LAYOUT_OUT_IN) or all packed in panels (LAYOUT_PACKED,
# the lowering's choice for batches).
# ``ptab`` (or NULL): per direction, the address of layer 0's input projection of every row, gathered
# by the lowering from a projected-embedding table (seqjit.graph.input_fold); the product is skipped.
# ``finite_hh``: every w_hh is finite, so the first step from a zero state (h0 NULL) is b_hh, unmultiplied.
# scratch: T*B*G*H (input projections) + B*G*H + 2*B*H (h, c) + 2*T*B*D*H (layer outputs) floats.
from libc.stdint cimport int64_t
from libc.string cimport memset, memcpy


cdef void native_rnn_sequence(bint lstm, const float* x, Py_ssize_t rb, Py_ssize_t rt, Py_ssize_t ldx, int I,
                              const float* h0, const float* c0, const int64_t* lengths, const Py_ssize_t* wtab,
                              float* out, Py_ssize_t ldo, float* h_n, float* c_n,
                              int B, int T, int H, int L, int D, float* scratch, int nthreads,
                              int layout, const Py_ssize_t* ptab, bint finite_hh) noexcept nogil:
    cdef int G = 4 if lstm else 3
    cdef Py_ssize_t GH = <Py_ssize_t>G * H, DH = <Py_ssize_t>D * H
    cdef float* xg = scratch
    cdef float* xgd
    cdef float* hg = xg + <Py_ssize_t>T * B * GH
    cdef float* h = hg + <Py_ssize_t>B * GH
    cdef float* c = h + <Py_ssize_t>B * H
    cdef float* mid0 = c + <Py_ssize_t>B * H
    cdef float* mid1 = mid0 + <Py_ssize_t>T * B * DH
    cdef const float* lin = x
    cdef Py_ssize_t in_rb = rb, in_rt = rt, in_ld = ldx, o_rb, o_rt, o_ld, row
    cdef float* lout
    cdef int k, d, s, b, t, j, n_in = I, len_b, nact
    cdef const Py_ssize_t* wt
    cdef const float* xr
    cdef float* hr
    cdef float* orow
    for k in range(L):
        if k == L - 1:
            lout, o_rb, o_rt, o_ld = out, rb, rt, ldo
        else:
            lout, o_rb, o_rt, o_ld = (mid0 if k % 2 == 0 else mid1), 1, B, DH
        for b in range(B):
            for t in range(T):
                memset(lout + (b * o_rb + t * o_rt) * o_ld, 0, DH * sizeof(float))
        for d in range(D):
            wt = wtab + (k * D + d) * 4
            # input projection of every row (b, t) of the layer input, in the input's row order
            if k == 0 and ptab != NULL:
                xgd = <float*>ptab[d]
            else:
                xgd = xg
                native_linear(lin, in_ld, B * T, n_in, <const float*>wt[0], <int>GH, layout, <const float*>wt[2],
                              xg, GH, _NONE, nthreads)
            if h0 != NULL:
                memcpy(h, h0 + <Py_ssize_t>(k * D + d) * B * H, B * H * sizeof(float))
            else:
                memset(h, 0, B * H * sizeof(float))
            if lstm:
                if c0 != NULL:
                    memcpy(c, c0 + <Py_ssize_t>(k * D + d) * B * H, B * H * sizeof(float))
                else:
                    memset(c, 0, B * H * sizeof(float))
            for s in range(T):
                # only rows up to the last one still running (all of them unless sorted by length,
                # longest first, as generate() batches them): the rest keep their final state
                nact = B
                if lengths != NULL:
                    while nact > 0 and lengths[nact - 1] <= s:
                        nact -= 1
                    if nact == 0:
                        break
                if s == 0 and h0 == NULL and finite_hh:  # h is zero: h W_hh^T + b_hh is b_hh exactly
                    for b in range(nact):
                        if wt[3] != 0:
                            memcpy(hg + b * GH, <const float*>wt[3], GH * sizeof(float))
                        else:
                            memset(hg + b * GH, 0, GH * sizeof(float))
                else:
                    native_linear(h, H, nact, H, <const float*>wt[1], <int>GH, layout, <const float*>wt[3], hg, GH,
                                  _NONE, nthreads)
                for b in range(nact):
                    len_b = T if lengths == NULL else <int>lengths[b]
                    if s >= len_b:
                        continue
                    t = len_b - 1 - s if d == 1 else s
                    xr = xgd + (b * in_rb + t * in_rt) * GH
                    hr = hg + b * GH
                    orow = lout + (b * o_rb + t * o_rt) * o_ld + d * H
                    if lstm:
                        lstm_gates_row(xr, hr, c + b * H, h + b * H, c + b * H, H)
                    else:
                        gru_gates_row(xr, hr, h + b * H, h + b * H, H)
                    memcpy(orow, h + b * H, H * sizeof(float))
            memcpy(h_n + <Py_ssize_t>(k * D + d) * B * H, h, B * H * sizeof(float))
            if lstm:
                memcpy(c_n + <Py_ssize_t>(k * D + d) * B * H, c, B * H * sizeof(float))
        lin, in_rb, in_rt, in_ld, n_in = lout, o_rb, o_rt, o_ld, <int>DH


cdef inline int run_rnn_sequence(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    native_rnn_sequence(c.i[RNN_SEQUENCE_I_LSTM] != 0, <float*>c.p[RNN_SEQUENCE_P_X], c.i[RNN_SEQUENCE_I_RB],
                        c.i[RNN_SEQUENCE_I_RT], c.i[RNN_SEQUENCE_I_LDX], <int>c.i[RNN_SEQUENCE_I_INPUT_SIZE],
                        <float*>c.p[RNN_SEQUENCE_P_H0], <float*>c.p[RNN_SEQUENCE_P_C0],
                        <int64_t*>c.p[RNN_SEQUENCE_P_LENGTHS], <Py_ssize_t*>c.p[RNN_SEQUENCE_P_WTAB],
                        <float*>c.p[RNN_SEQUENCE_P_OUT], c.i[RNN_SEQUENCE_I_LDO], <float*>c.p[RNN_SEQUENCE_P_H_N],
                        <float*>c.p[RNN_SEQUENCE_P_C_N], <int>c.i[RNN_SEQUENCE_I_BATCH],
                        <int>c.i[RNN_SEQUENCE_I_STEPS], <int>c.i[RNN_SEQUENCE_I_HIDDEN],
                        <int>c.i[RNN_SEQUENCE_I_LAYERS], <int>c.i[RNN_SEQUENCE_I_DIRS],
                        <float*>c.p[RNN_SEQUENCE_P_SCRATCH], nt, <int>c.i[RNN_SEQUENCE_I_LAYOUT],
                        <Py_ssize_t*>c.p[RNN_SEQUENCE_P_PTAB], c.i[RNN_SEQUENCE_I_FINITE_HH] != 0)
    return ERR_NONE
