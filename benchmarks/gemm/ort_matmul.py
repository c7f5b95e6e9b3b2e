"""ONNX Runtime's MatMul at a decode shape, for decode_shapes.py's third column: a one-node ONNX model
``y = MatMul(x, W^T)`` (x [M, K] a graph input, W^T [K, N] an initializer: the layout MLAS packs at
session start, as an exported linear layer's weight is), built with the ``onnx`` helper and run through
an ``onnxruntime.InferenceSession`` at the given intra-op thread count (inter-op 1, every graph
optimisation on), its input and output bound once (``io_binding``) so a call is the MatMul and the
session's own overhead, not Python's conversions.

Optional: :func:`available` is False (and decode_shapes.py leaves the column empty) without
``onnx`` and ``onnxruntime`` (the ``bench`` extra).
"""
from __future__ import annotations

import numpy as np


def available() -> bool:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def model_bytes(w: np.ndarray) -> bytes:
    """The serialised one-node model computing x @ w.T for w [N, K] (float32)."""
    from onnx import TensorProto, helper, numpy_helper

    n, k = w.shape
    node = helper.make_node("MatMul", ["x", "wt"], ["y"])
    graph = helper.make_graph(
        [node], "decode_matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", n])],
        [numpy_helper.from_array(np.ascontiguousarray(w.T), "wt")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by every onnxruntime of the bench extra
    return model.SerializeToString()


def matmul_call(w: np.ndarray, x: np.ndarray, threads: int):
    """A function running ``x @ w.T`` once in ONNX Runtime (its result in the bound output), and the
    output array it writes."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model_bytes(w), opts, providers=["CPUExecutionProvider"])
    y = np.empty((x.shape[0], w.shape[0]), np.float32)
    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output("y", "cpu", 0, np.float32, list(y.shape), y.ctypes.data)

    def call(_keep=(y, x)):  # ONNX Runtime holds their addresses: they live as long as the call
        sess.run_with_iobinding(binding)
    call()
    return call, y
