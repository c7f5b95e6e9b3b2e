# Native GRU / LSTM cell steps for the replay VM: ``include "rnn/_native_cells.pxi"`` after
# linear/_native.pxi. Two GEMVs (x @ W_ih^T + b_ih, h @ W_hh^T + b_hh) into scratch, then the gate
# math of reference.gru_gates / lstm_gates with the vectorisable sigmoid/tanh of _vecmath.pxi.


cdef void native_gru_cell(const float* x, Py_ssize_t ldx, const float* h, Py_ssize_t ldh,
                          const float* w_ih, const float* w_hh, const float* b_ih, const float* b_hh,
                          float* out, Py_ssize_t ldo, int B, int I, int H, float* scratch, int nthreads) noexcept nogil:
    cdef float* xg = scratch
    cdef float* hg = scratch + <Py_ssize_t>B * 3 * H
    cdef int b, j
    cdef float r, z, n
    cdef float* xr
    cdef float* hr
    native_linear(x, ldx, B, I, w_ih, 3 * H, True, b_ih, xg, 3 * H, _NONE, nthreads)
    native_linear(h, ldh, B, H, w_hh, 3 * H, True, b_hh, hg, 3 * H, _NONE, nthreads)
    for b in range(B):
        xr = xg + b * 3 * H
        hr = hg + b * 3 * H
        for j in range(H):
            r = sigmoid_f32(xr[j] + hr[j])
            z = sigmoid_f32(xr[H + j] + hr[H + j])
            n = tanh_f32(xr[2 * H + j] + r * hr[2 * H + j])
            out[b * ldo + j] = (<float>1.0 - z) * n + z * h[b * ldh + j]


cdef void native_lstm_cell(const float* x, Py_ssize_t ldx, const float* h, Py_ssize_t ldh,
                           const float* c, Py_ssize_t ldc, const float* w_ih, const float* w_hh,
                           const float* b_ih, const float* b_hh, float* h_out, float* c_out,
                           int B, int I, int H, float* scratch, int nthreads) noexcept nogil:
    cdef float* xg = scratch
    cdef float* hg = scratch + <Py_ssize_t>B * 4 * H
    cdef int b, j
    cdef float ig, fg, gg, og, cn, a0, a1, a2, a3
    cdef float* xr
    cdef float* hr
    native_linear(x, ldx, B, I, w_ih, 4 * H, True, b_ih, xg, 4 * H, _NONE, nthreads)
    native_linear(h, ldh, B, H, w_hh, 4 * H, True, b_hh, hg, 4 * H, _NONE, nthreads)
    for b in range(B):
        xr = xg + b * 4 * H
        hr = hg + b * 4 * H
        for j in range(H):
            ig = sigmoid_f32(xr[j] + hr[j])
            fg = sigmoid_f32(xr[H + j] + hr[H + j])
            gg = tanh_f32(xr[2 * H + j] + hr[2 * H + j])
            og = sigmoid_f32(xr[3 * H + j] + hr[3 * H + j])
            cn = fg * c[b * ldc + j] + ig * gg
            c_out[b * H + j] = cn
            h_out[b * H + j] = og * tanh_f32(cn)
