"""The details panel's HTML: one column a narrow panel can show, each tensor a name then its facts."""

from __future__ import annotations

import re

from explorer import load
from explorer.views.details import details_html, node_details


def test_each_tensor_is_its_name_then_an_unbroken_shape_and_where_it_goes() -> None:
    graph = load("zoo:resnet18")
    page = details_html(node_details(graph, "/layer1/layer1.0/conv1/Conv"))
    rows = re.findall(r"<tr><td>(.*?)</td></tr>", page)
    tensor_rows = [row for row in rows if 'class="oge-tensor"' in row]
    assert len(tensor_rows) == 3  # one input, one output, one weight: one cell each, no side columns
    assert all("</td><td>" not in row for row in tensor_rows)
    incoming, outgoing, weight = tensor_rows
    assert '<span class="oge-shape">[batch, 64, 56, 56] float32</span>' in incoming
    assert "from <code>/maxpool/MaxPool</code>" in incoming
    assert "to <code>/layer1/layer1.0/bn1/BatchNormalization</code>" in outgoing
    assert '<span class="oge-shape">[64, 64, 3, 3] float32</span>' in weight
    assert '<span title="147,456 bytes">144.0 KiB</span>' in weight
    assert "min=" in weight and "std=" in weight
