"""The ONNX adapter: ONNX files and protos into the core's graph model, and back.

Loading (:func:`explorer.load`), building the graph model from a ``ModelProto``,
shape inference, walks over protos, weights and external data, the ONNX summary,
the files a worker reads, random inputs for a model's signature, the input shapes a
user gives, the worker-side file steps (check, save), the installed ONNX Runtime's kernel
registry (:mod:`~explorer.onnx_adapter.ort_registry`) and one reference run on ONNX Runtime
(:mod:`~explorer.onnx_adapter.ort_run`). It imports only the core and :mod:`explorer.isolation`.
(The folder is not called ``onnx``: it must never shadow the onnx package.)

Examples
--------
>>> from explorer.onnx_adapter.load import load
>>> graph = load("zoo:mlp", input_shapes={"input": [4, 1, 28, 28]})
>>> graph.ir, graph.summary().inputs[0].shape
('onnx', (4, 1, 28, 28))
"""

__all__ = ["PRESTART_IMPORTS"]

PRESTART_IMPORTS: tuple[str, ...] = ("explorer.onnx_adapter.shape_inference",)
"""What a warm worker should import before ``explorer.load`` asks it to infer shapes (onnx and
numpy come with it). The caller hands it to :func:`explorer.isolation.worker.prestart`
(``widgets.warm.warm_up`` does): the worker names no module above itself."""
