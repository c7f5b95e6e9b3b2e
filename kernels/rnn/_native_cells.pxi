# Native GRU / LSTM cell steps for the replay VM: ``include "rnn/_native_cells.pxi"`` after
# linear/_native.pxi. Weights as given ("out_in", [G*H, I]) or packed in panels (``layout``
# LAYOUT_PACKED: the lowering passes packed copies for more than a few rows). Two GEMVs
# (x @ W_ih^T + b_ih, h @ W_hh^T + b_hh) into scratch, then the gate math (written over the hidden
# projections: the input ones stay read only, so gathered table rows serve without a copy) of reference.gru_gates /
# lstm_gates in C (activations/native_act.h: the _vecmath sigmoid/tanh in short loops over few
# pointers each, compiled per instruction set, so they vectorise 16 lanes wide on AVX-512).
#
# ``pre`` (or NULL): rows [B, G*H] added to the input projection, which the lowering gathered from
# a table of projected embeddings (seqjit.graph.input_fold); ``w_ih`` NULL then means the whole
# input projection is ``pre`` (x unused).


cdef inline const float* _input_gates(const float* x, Py_ssize_t ldx, const float* w_ih, const float* b_ih,
                                      const float* pre, float* xg, int B, int I, int GH, int nthreads,
                                      int layout) noexcept nogil:
    """The input projections [B, GH]: ``pre`` itself when it is all of them, else computed into xg."""
    cdef Py_ssize_t j, n = <Py_ssize_t>B * GH
    if w_ih == NULL:
        return pre
    native_linear(x, ldx, B, I, w_ih, GH, layout, b_ih, xg, GH, _NONE, nthreads)
    if pre != NULL:
        for j in range(n):
            xg[j] += pre[j]
    return xg


cdef inline void gru_gates_row(const float* xr, float* hr, const float* h, float* out, int H) noexcept nogil:
    """xr: [r | z | n] input projections (read only), hr: the hidden ones (overwritten); out = h'
    (C, per ISA: activations/native_act.h)."""
    sj_gru_gates_row(xr, hr, h, out, H)


cdef inline void lstm_gates_row(const float* xr, float* hr, const float* c, float* h_out, float* c_out,
                                int H) noexcept nogil:
    """xr: [i | f | g | o] input projections (read only), hr: the hidden ones (overwritten)."""
    sj_lstm_gates_row(xr, hr, c, h_out, c_out, H)


cdef void native_gru_cell(const float* x, Py_ssize_t ldx, const float* h, Py_ssize_t ldh,
                          const float* w_ih, const float* w_hh, const float* b_ih, const float* b_hh,
                          float* out, Py_ssize_t ldo, int B, int I, int H, float* scratch, int nthreads,
                          int layout, const float* pre) noexcept nogil:
    cdef float* hg = scratch + <Py_ssize_t>B * 3 * H
    cdef int b
    cdef const float* xg = _input_gates(x, ldx, w_ih, b_ih, pre, scratch, B, I, 3 * H, nthreads, layout)
    native_linear(h, ldh, B, H, w_hh, 3 * H, layout, b_hh, hg, 3 * H, _NONE, nthreads)
    for b in range(B):
        gru_gates_row(xg + b * 3 * H, hg + b * 3 * H, h + b * ldh, out + b * ldo, H)


cdef void native_lstm_cell(const float* x, Py_ssize_t ldx, const float* h, Py_ssize_t ldh,
                           const float* c, Py_ssize_t ldc, const float* w_ih, const float* w_hh,
                           const float* b_ih, const float* b_hh, float* h_out, float* c_out,
                           int B, int I, int H, float* scratch, int nthreads, int layout,
                           const float* pre) noexcept nogil:
    cdef float* hg = scratch + <Py_ssize_t>B * 4 * H
    cdef int b
    cdef const float* xg = _input_gates(x, ldx, w_ih, b_ih, pre, scratch, B, I, 4 * H, nthreads, layout)
    native_linear(h, ldh, B, H, w_hh, 4 * H, layout, b_hh, hg, 4 * H, _NONE, nthreads)
    for b in range(B):
        lstm_gates_row(xg + b * 4 * H, hg + b * 4 * H, c + b * ldc, h_out + b * H, c_out + b * H, H)


cdef inline int run_gru_cell(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    native_gru_cell(<float*>c.p[GRU_CELL_P_X], c.i[GRU_CELL_I_LDX], <float*>c.p[GRU_CELL_P_H],
                    c.i[GRU_CELL_I_LDH], <float*>c.p[GRU_CELL_P_W_IH], <float*>c.p[GRU_CELL_P_W_HH],
                    <float*>c.p[GRU_CELL_P_B_IH], <float*>c.p[GRU_CELL_P_B_HH], <float*>c.p[GRU_CELL_P_OUT],
                    c.i[GRU_CELL_I_LDO], <int>c.i[GRU_CELL_I_BATCH], <int>c.i[GRU_CELL_I_INPUT_SIZE],
                    <int>c.i[GRU_CELL_I_HIDDEN], <float*>c.p[GRU_CELL_P_SCRATCH], nt, <int>c.i[GRU_CELL_I_LAYOUT],
                    <float*>c.p[GRU_CELL_P_PRE])
    return ERR_NONE


cdef inline int run_lstm_cell(Instr* c, int nt, bint team, Py_ssize_t* err) noexcept nogil:
    native_lstm_cell(<float*>c.p[LSTM_CELL_P_X], c.i[LSTM_CELL_I_LDX], <float*>c.p[LSTM_CELL_P_H],
                     c.i[LSTM_CELL_I_LDH], <float*>c.p[LSTM_CELL_P_C], c.i[LSTM_CELL_I_LDC],
                     <float*>c.p[LSTM_CELL_P_W_IH], <float*>c.p[LSTM_CELL_P_W_HH], <float*>c.p[LSTM_CELL_P_B_IH],
                     <float*>c.p[LSTM_CELL_P_B_HH], <float*>c.p[LSTM_CELL_P_H_OUT],
                     <float*>c.p[LSTM_CELL_P_C_OUT], <int>c.i[LSTM_CELL_I_BATCH],
                     <int>c.i[LSTM_CELL_I_INPUT_SIZE], <int>c.i[LSTM_CELL_I_HIDDEN],
                     <float*>c.p[LSTM_CELL_P_SCRATCH], nt, <int>c.i[LSTM_CELL_I_LAYOUT],
                     <float*>c.p[LSTM_CELL_P_PRE])
    return ERR_NONE
