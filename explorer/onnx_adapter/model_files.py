"""Model files for the worker: a graph's own file when it has one, else a private copy; pass outputs.

Native steps read models from files (:func:`explorer.isolation.worker.run_on_model`).
Serializing a 344 MB model again for every step costs seconds, and a model
whose weights stay in external files cannot be serialized into one message at
all above 2 GiB. So a graph remembers a file that holds exactly its model
(``ModelGraph.model_path``: the file it was loaded from, or the file a pass
wrote) and workers read that file. Pass outputs live in this process's private
scratch folder (mode 0700, removed at exit; each output's folder is removed as
soon as the graph built from it is garbage-collected).

Examples
--------
>>> from explorer import load
>>> source = worker_source(load("zoo:mlp"))
>>> type(source).__name__
'ModelProto'
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explorer.core.errors import ModelLoadError, ModelTooLargeError
from explorer.isolation.io import write_bytes_atomic
from explorer.onnx_adapter.adapter import onnx_model
from explorer.onnx_adapter.weights import external_tensors

if TYPE_CHECKING:
    from onnx import ModelProto

    from explorer.core.graph import ModelGraph

__all__ = ["scratch_dir", "new_model_dir", "own_folder", "worker_source", "stage_variant", "save_graph_model"]

_SCRATCH: Path | None = None


def scratch_dir() -> Path:
    """This process's private folder for model files (created on first use, removed at exit).

    Examples
    --------
    >>> oct(scratch_dir().stat().st_mode & 0o777)
    '0o700'
    """
    global _SCRATCH
    if _SCRATCH is None or not _SCRATCH.is_dir():
        from explorer.isolation.worker import defaults

        _SCRATCH = Path(tempfile.mkdtemp(prefix="explorer-models-", dir=defaults.tmp_dir))
        atexit.register(shutil.rmtree, _SCRATCH, True)
    return _SCRATCH


def new_model_dir(prefix: str = "model-") -> Path:
    """A fresh private folder inside :func:`scratch_dir` for one model file and its external data.

    Examples
    --------
    >>> a, b = new_model_dir(), new_model_dir()
    >>> a != b and a.parent == b.parent == scratch_dir()
    True
    """
    return Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_dir()))


def own_folder(graph: ModelGraph, folder: Path) -> None:
    """Remove ``folder`` when ``graph`` is garbage-collected (it holds the graph's model file).

    Examples
    --------
    >>> import gc
    >>> from explorer import load
    >>> g, folder = load("zoo:mlp"), new_model_dir()
    >>> own_folder(g, folder)
    >>> del g; _ = gc.collect()
    >>> folder.exists()
    False
    """
    weakref.finalize(graph, shutil.rmtree, str(folder), True)


def worker_source(graph: ModelGraph) -> str | Any:
    """What to hand a worker for this graph's model: a file path when there is one, else the model.

    A graph loaded from a file (without ``input_shapes``) or from a pass's output
    file gives that path, so nothing is serialized again. A graph whose large
    weights stay in files (external files, or the model file itself:
    :func:`explorer.onnx_adapter.model_wire.read_model_lazily`) but whose model differs from any
    file (its input shapes were fixed) is written once into a private folder
    beside copies of those files (:func:`stage_variant`), and that
    file is remembered. Otherwise the ``ModelProto`` itself (the worker stages it).

    Raises
    ------
    ModelLoadError
        The graph's weights are read from its model file, and that file changed on
        disk since it was loaded.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer import zoo
    >>> worker_source(load(zoo.save("mlp"))).endswith("mlp.onnx")
    True
    """
    onnx_model(graph, "a model file")
    if graph.lazy_file is not None and graph.lazy_file.changed():
        raise ModelLoadError(
            "the file changed on disk since it was loaded, and the loaded model reads its weights "
            "from it; load it again",
            path=graph.lazy_file.path,
        )
    if graph.model_path is not None and graph.model_path.is_file():
        return str(graph.model_path)
    if graph.weights_dir is None or not external_tensors(graph.model):
        return graph.model
    target = Path(stage_variant(graph, graph.model))
    graph.model_path = target
    return str(target)


def stage_variant(graph: ModelGraph, model: ModelProto) -> str:
    """Write ``model``, a changed copy of ``graph.model``, where a worker can read it with its weights.

    ``model`` may keep tensors in the files ``graph.model``'s external tensors
    point into (external data, or the model file itself); it is written into a
    private folder (removed with ``graph``) beside copies of those files, so
    that their locations resolve (onnx refuses external data behind links).

    Examples
    --------
    >>> import os
    >>> from explorer import load
    >>> from explorer import zoo
    >>> graph = load(zoo.save("resnet18"))
    >>> staged = stage_variant(graph, graph.model)
    >>> sorted(os.listdir(os.path.dirname(staged)))
    ['model.onnx', 'resnet18.onnx']
    """
    folder = new_model_dir("copy-")
    own_folder(graph, folder)
    locations = {
        entry.value for t in external_tensors(model) for entry in t.external_data if entry.key == "location"
    }
    for location in sorted(locations):  # checked at load: inside the model's folder
        target = folder / location
        target.parent.mkdir(parents=True, exist_ok=True)
        source = (graph.weights_dir or Path(".")) / location
        # a copy, not a link: onnx refuses external data behind a hard link or a symlink ("a
        # potential hardlink attack"), and a hard link would make it refuse the user's own file too
        shutil.copyfile(source, target)
    name = "model.onnx"
    while name in locations:
        name = "_" + name
    return str(_save_staged(model, folder / name))


def _save_staged(model: ModelProto, target: Path) -> Path:
    from explorer.core.tensors import over_protobuf_limit

    if over_protobuf_limit(model):
        raise ModelTooLargeError(
            "the model's structure alone (its weights stripped) is over protobuf's 2 GiB limit",
            path=str(target),
        )
    return write_bytes_atomic(model.SerializeToString(), target, fsync=False)


def save_graph_model(graph: ModelGraph, path: str | os.PathLike[str]) -> Path:
    """Save a graph's model to ``path`` atomically, with its weights wherever they live.

    A model that has a file (a pass's output, weights in external files) is
    re-saved from that file in the worker, its weights read there, and written
    beside ``path`` as ``<name>.data`` when over 2 GiB; others are serialized here.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import load
    >>> out = os.path.join(tempfile.mkdtemp(), "out.onnx")
    >>> save_graph_model(load("zoo:mlp"), out).name
    'out.onnx'
    """
    from explorer.isolation import worker
    from explorer.isolation.io import save_model_atomic
    from explorer.onnx_adapter.files import resave

    source = worker_source(graph)
    if isinstance(source, str):
        worker.run_on_model(resave, source, output=path, step="save the model")
        return Path(path)
    return save_model_atomic(source, path)
