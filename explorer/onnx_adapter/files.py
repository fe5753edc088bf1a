"""Steps on ONNX model files that run in the worker: save (with external data when needed), re-save, check.

Each step that reads takes the model's path first, so it runs through
:func:`explorer.isolation.worker.run_on_model`, which stages the model as a file, moves
``out_path`` to its destination and turns a crash into a typed error. They are top-level
functions (a worker unpickles them by module path) and import onnx only when called.
(:mod:`explorer.onnx_adapter.model_files` decides, in the parent, which file a worker reads.)

Examples
--------
>>> from explorer.isolation import worker
>>> from explorer import zoo
>>> worker.run_on_model(check_model, zoo.build("mlp"))
{'valid': True, 'full_check': True}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from explorer.core.tensors import over_protobuf_limit

__all__ = ["save_model", "resave", "check_model"]

PathLike = str | os.PathLike[str]


def save_model(model: Any, out_path: PathLike) -> None:
    """Save ``model``; tensors go to ``<name>.data`` next to it when the proto is too big for one file.

    Parameters
    ----------
    model : onnx.ModelProto
        The model (saving with external data rewrites its tensors' locations).
    out_path : str or os.PathLike
        The file to write.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     save_model(zoo.build("mlp"), os.path.join(tmp, "m.onnx"))
    ...     sorted(os.listdir(tmp))
    ['m.onnx']
    """
    import onnx

    out = Path(out_path)
    big = over_protobuf_limit(model)
    onnx.save_model(model, os.fspath(out), save_as_external_data=big, location=f"{out.name}.data")


def resave(path: PathLike, *, out_path: PathLike) -> None:
    """Save the model file ``path`` to ``out_path``; its external weights are copied file to file.

    A model with weights in external files keeps them there: they are copied to
    ``<out name>.data`` without being read into memory
    (:func:`~explorer.onnx_adapter.external_copy.copy_external_model`), so a model of any size
    is saved in the memory of its graph. Others are loaded and saved (see :func:`save_model`).

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     resave(zoo.save("mlp", tmp), out_path=os.path.join(tmp, "copy.onnx"))
    ...     sorted(os.listdir(tmp))
    ['copy.onnx', 'mlp.onnx']
    """
    import onnx

    from explorer.onnx_adapter.external_copy import copy_external_model
    from explorer.onnx_adapter.weights import external_tensors

    model = onnx.load(os.fspath(path), load_external_data=False)
    if external_tensors(model):
        copy_external_model(path, out_path)
    else:
        save_model(model, out_path)


def check_model(path: PathLike, full_check: bool = True) -> dict[str, Any]:
    """Run the onnx checker on a model file (with shape inference when ``full_check``).

    Parameters
    ----------
    path : str or os.PathLike
        The model file; external data is found next to it.
    full_check : bool, optional
        Also run strict shape inference, by default True.

    Returns
    -------
    dict
        ``{"valid": True, "full_check": full_check}``.

    Raises
    ------
    onnx.checker.ValidationError
        The model breaks the ONNX spec.
    onnx.shape_inference.InferenceError
        Shape inference found a contradiction (``full_check`` only).

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from explorer.isolation import worker
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> graph = helper.make_graph([helper.make_node("Neg", ["missing"], ["y"])], "g", [x], [x])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> try:  # no input, initializer or node makes "missing"
    ...     worker.run_on_model(check_model, model)
    ... except Exception as exc:
    ...     print(type(exc).__name__)
    ValidationError
    """
    import onnx

    onnx.checker.check_model(os.fspath(path), full_check=full_check)
    return {"valid": True, "full_check": full_check}
