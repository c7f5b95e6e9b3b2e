# The int8 GRU / LSTM recurrence of one layer and direction in C (the arithmetic of reference.py),
# shared by cython_cpu.pyx and the native replay VM (seqjit.graph._native_vm). The includer supplies
# the _qgemm.h declarations (sjq_quantize_row, sjq_columns), prange, memcpy/memset, int8_t/int32_t/
# int64_t, and the float32 gate rows gru_gates_row(xr, hr, h, out, H) / lstm_gates_row(xr, hr, c,
# h_out, c_out, H) (xr, the input projections, read only; hr, the hidden ones, overwritten).
#
# The state is kept with its rows sorted by length, longest first, so the rows still running at step
# s are a prefix: per step only they are quantized and multiplied by the int8 W_hh (in column blocks
# of RI8_BLOCK_COLS weight rows, over threads when nthreads > 1) and dequantized with the bias into
# hg; then the gate row of each running row reads its input projections in xg (read only) and
# writes over its row of hg.

DEF RI8_BLOCK_COLS = 64


cdef void int8_hidden_product(const float* h, int B, int H, const int8_t* w, const float* ws, const float* bias,
                              int GH, float* hg, int8_t* qh, int32_t* hsum, float* hs, int isa,
                              int nthreads) noexcept nogil:
    """hg [B, GH] = linear_int8(h [B, H], w, ws, bias)."""
    cdef int b
    cdef long blocks = (GH + RI8_BLOCK_COLS - 1) // RI8_BLOCK_COLS, t, c0, c1
    for b in range(B):
        hs[b] = sjq_quantize_row(isa, h + <Py_ssize_t>b * H, H, qh + <Py_ssize_t>b * H, &hsum[b])
    if nthreads > 1 and blocks > 1:
        for t in prange(blocks, nogil=True, num_threads=nthreads, schedule="static"):
            c0 = t * RI8_BLOCK_COLS
            c1 = GH if c0 + RI8_BLOCK_COLS > GH else c0 + RI8_BLOCK_COLS
            sjq_columns(isa, qh, H, hsum, hs, B, H, w, ws, bias, hg, GH, NULL, 0, c0, c1)
    else:
        sjq_columns(isa, qh, H, hsum, hs, B, H, w, ws, bias, hg, GH, NULL, 0, 0, GH)


cdef void int8_recurrence(bint lstm, const float* xg, Py_ssize_t ldx, int B, int T, int H, const int8_t* w,
                          const float* ws, const float* bias, const float* h0, const float* c0,
                          const int64_t* lengths, bint reverse, float* out, float* h, float* c,
                          float* scratch, int8_t* qh, int isa, int nthreads, int32_t* sums) noexcept nogil:
    """xg: row (b, t) at (b * T + t) * ldx, G*H floats; out [B, T, H]; h, c [B, H]: the final state,
    from h0 / c0 (zeros when NULL); lengths NULL: all T. scratch: B*G*H + 4*B + 2*B*H floats;
    qh: B*H bytes. sums (NULL, or [T, B, G*H] zeroed, for tests): the int32 sums of every step's
    product, for the rows running then (from the quantized h of the product itself)."""
    cdef int G = 4 if lstm else 3
    cdef Py_ssize_t GH = <Py_ssize_t>G * H, BH = <Py_ssize_t>B * H
    cdef float* hg = scratch
    cdef float* hs = hg + B * GH
    cdef const float* xrow
    cdef int32_t* hsum = <int32_t*>(hs + B)
    cdef int* order = <int*>(hs + 2 * B)
    cdef int* lens = <int*>(hs + 3 * B)
    cdef float* hrow = hs + 4 * B  # the state, rows in order
    cdef float* crow = hrow + BH
    cdef int s, i, j, b, t, n, key, len_b
    for i in range(B):  # stable insertion sort by length, longest first
        key = T if lengths == NULL else <int>lengths[i]
        j = i
        while j > 0 and lens[j - 1] < key:
            lens[j], order[j] = lens[j - 1], order[j - 1]
            j -= 1
        lens[j], order[j] = key, i
    for i in range(B):
        b = order[i]
        if h0 != NULL:
            memcpy(hrow + i * H, h0 + <Py_ssize_t>b * H, H * sizeof(float))
        else:
            memset(hrow + i * H, 0, H * sizeof(float))
        if lstm and c0 != NULL:
            memcpy(crow + i * H, c0 + <Py_ssize_t>b * H, H * sizeof(float))
        elif lstm:
            memset(crow + i * H, 0, H * sizeof(float))
    memset(out, 0, BH * T * sizeof(float))
    n = B
    for s in range(T):
        while n > 0 and lens[n - 1] <= s:
            n -= 1
        if n == 0:
            break
        int8_hidden_product(hrow, n, H, w, ws, bias, <int>GH, hg, qh, hsum, hs, isa, nthreads)
        if sums != NULL:
            for i in range(n):
                sjq_columns(isa, qh + i * H, H, hsum + i, hs + i, 1, H, w, ws, bias, NULL, 0,
                            sums + (s * B + order[i]) * GH, GH, 0, GH)
        for i in range(n):
            b = order[i]
            t = lens[i] - 1 - s if reverse else s
            xrow = xg + (<Py_ssize_t>b * T + t) * ldx
            if lstm:
                lstm_gates_row(xrow, hg + i * GH, crow + i * H, hrow + i * H, crow + i * H, H)
            else:
                gru_gates_row(xrow, hg + i * GH, hrow + i * H, hrow + i * H, H)
            memcpy(out + (<Py_ssize_t>b * T + t) * H, hrow + i * H, H * sizeof(float))
    for i in range(B):
        b = order[i]
        memcpy(h + <Py_ssize_t>b * H, hrow + i * H, H * sizeof(float))
        if lstm:
            memcpy(c + <Py_ssize_t>b * H, crow + i * H, H * sizeof(float))
