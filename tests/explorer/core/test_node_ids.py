"""Tensor-node ids: the graph model builds them, the summary reads them, without importing each other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from explorer import load
from explorer.core.node_ids import INPUT_PREFIX, OUTPUT_PREFIX, is_tensor_node

ROOT = Path(__file__).resolve().parents[3]


def test_built_graphs_use_the_prefixes_for_every_tensor_node() -> None:
    graph = load("zoo:mlp")
    kinds = {node: data["kind"] for node, data in graph.nx.nodes(data=True)}
    assert {n for n, k in kinds.items() if k == "input"} == {INPUT_PREFIX + "input"}
    assert {n for n, k in kinds.items() if k == "output"} == {OUTPUT_PREFIX + "logits"}
    assert all(is_tensor_node(n) == (k != "op") for n, k in kinds.items())


def test_the_summary_does_not_import_the_graph_model() -> None:
    script = "import sys, explorer.core.summary; print('explorer.core.graph' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"  # the old graph.py <-> summary.py cycle is gone
