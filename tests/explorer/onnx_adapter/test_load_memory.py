"""Opening a model costs its structure, not its weights: neither the kernel nor the worker holds them.

A model file with tens of MB of weights is opened as a notebook's view opens it (``explorer.load``,
the summary, the layout, the figure), in a fresh process with its worker, and the peak memory
(PSS) of that process and of its worker is compared with opening its weightless twin (the same
graph, tensors reduced to their shapes: :func:`explorer.onnx_adapter.weights.stripped_copy`), measured in the
same test. The weights may add at most half their size to either process; before the weights
stayed in the file, the kernel held them once and the worker, parsing the file for shape
inference, twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from explorer import load, zoo
from explorer.core.diff import weight_digests
from explorer.core.errors import ModelLoadError
from explorer.onnx_adapter.model_files import worker_source
from explorer.onnx_adapter.model_wire import in_model_file
from explorer.onnx_adapter.weights import external_tensors, stripped_copy, tensor_array
from explorer.runtimes import random_feeds, run_onnxruntime

ROOT = Path(__file__).resolve().parents[3]

# Opens the model at argv[1] as GraphView does, after warming the same steps on a tiny model; prints
# the peaks (PSS) of this process, of its worker and of both together, and the same before opening.
OPEN = textwrap.dedent(
    """
    import gc, json, sys, time
    import explorer
    from explorer.views import layout as lay
    from explorer import zoo
    from explorer.views.figures import graph_figure
    from explorer.isolation.process_memory import ProcessTreeSampler, tree_memory

    def open_view(source):
        graph = explorer.load(source)
        graph.summary()
        layout = lay.layered(graph, collapse=lay.auto_collapse(graph), node_size="auto")
        return graph, graph_figure(graph, layout)

    open_view(zoo.build("resnet18"))  # imports, the worker and its imports, plotly's first figure
    gc.collect()
    time.sleep(0.2)
    base = tree_memory()
    with ProcessTreeSampler(interval_s=0.005) as sampler:
        opened = open_view(sys.argv[1])
    peak = sampler.result
    print(json.dumps({
        "kernel": peak.peak_root_pss_bytes - base.root_pss_bytes,
        "worker": peak.peak_children_pss_bytes - (base.pss_bytes - base.root_pss_bytes),
        "both": peak.peak_pss_bytes - base.pss_bytes,
    }))
    """
)


def _opening_costs(path: Path) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", OPEN, str(path)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def resnet_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("resnet") / "resnet18.onnx"
    onnx.save(zoo.build("resnet18"), path)
    return path


def test_opening_a_model_holds_its_weights_in_neither_the_kernel_nor_the_worker(
    resnet_file: Path, tmp_path: Path
) -> None:
    twin = tmp_path / "resnet18-weightless.onnx"
    onnx.save(stripped_copy(onnx.load(resnet_file)), twin)
    size = resnet_file.stat().st_size
    assert size > 40 * 2**20 and twin.stat().st_size < size / 20
    base, real = _opening_costs(twin), _opening_costs(resnet_file)
    mib = {k: f"{(real[k] - base[k]) / 2**20:.1f} MiB" for k in real}
    print(f"\nweights of {size / 2**20:.0f} MiB add: {mib}")
    assert real["both"] <= base["both"] + 2 * size  # the contract: at most twice the file
    assert real["kernel"] - base["kernel"] < size / 2, mib  # the kernel does not hold the weights
    assert real["worker"] - base["worker"] < size / 2, mib  # nor does the worker


def test_weights_left_in_the_file_read_as_the_file_holds_them(resnet_file: Path) -> None:
    graph = load(resnet_file)
    in_memory = {t.name: t for t in onnx.load(resnet_file).graph.initializer}
    lazy = [t for t in external_tensors(graph.model) if in_model_file(t, resnet_file)]
    assert lazy and graph.model.ByteSize() < resnet_file.stat().st_size / 10  # tensors under 1 MiB load
    for tensor in lazy:
        assert np.array_equal(
            tensor_array(tensor, graph.weights_dir), numpy_helper.to_array(in_memory[tensor.name])
        )
    assert graph.summary().external_tensors == 0  # the file holds them: not stored externally
    assert graph.summary().param_bytes == load(zoo.build("resnet18")).summary().param_bytes
    # the same content, the same digests, wherever the values are (a diff against a model in memory)
    assert weight_digests(graph) == weight_digests(load(onnx.load(resnet_file)))
    assert worker_source(graph) == str(resnet_file.resolve())  # workers read the file itself


def test_fixed_input_shapes_stage_a_file_beside_the_weights(resnet_file: Path) -> None:
    graph = load(resnet_file, input_shapes={"input": [2, 3, 224, 224]})
    staged = Path(worker_source(graph))
    assert staged != resnet_file and staged.parent != resnet_file.parent
    assert staged.stat().st_size < resnet_file.stat().st_size / 10  # the structure, beside a link
    feeds = random_feeds(graph.model)
    expected = run_onnxruntime(str(resnet_file), feeds, optimization="disabled")
    got = run_onnxruntime(str(staged), feeds, optimization="disabled")
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-5)


def test_a_file_rewritten_after_loading_is_not_read_as_the_loaded_model(
    resnet_file: Path, tmp_path: Path
) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(resnet_file.read_bytes())
    graph = load(path)
    onnx.save(zoo.build("resnet18", seed=1), path)
    os.utime(path, ns=(graph.lazy_file.mtime_ns + 10**9,) * 2)  # a coarse clock could keep the time
    with pytest.raises(ModelLoadError, match="changed on disk since it was loaded"):
        worker_source(graph)
