"""TVM: the importer tried on the whole model, then on each distinct node."""

from __future__ import annotations

from explorer import load, zoo
from explorer.targets import get_target, partition

from .models import maxpool_with_indices


def test_an_op_the_importer_lacks_and_a_node_it_refuses() -> None:
    target = get_target("tvm-llvm")
    custom = partition(load(zoo.build("custom_domain")), target)
    ops = custom.fallback_ops()
    assert ops["zoo.local::Swish"]["reasons"][0].startswith("op missing")
    assert target.fallback is None and custom.verdict.startswith("TVM cannot import the model")
    # MaxPool has a converter, but not for its Indices output: only the real import tells
    (pool,) = target.support(load(maxpool_with_indices())).values()
    assert not pool.supported and pool.blocking[0].kind == "import failed"
    assert "MaxPool" in pool.blocking[0].text


def test_a_model_that_imports_whole_is_supported_whole() -> None:
    support = get_target("tvm-llvm").support(load(zoo.build("mobilenetv2")))
    assert all(s.supported for s in support.values())
