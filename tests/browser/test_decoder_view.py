"""The 30-layer GenAI decoder in GraphView, in a real JupyterLab (issue #37).

The model is :func:`explorer.zoo.decoders.genai_decoder`'s ``"deep"`` int4 decoder (the session
fixture ``genai_decoder_deep``): SmolLM2-135M's 30 layers, ``MatMulNBits``,
``GroupQueryAttention``, ``SkipSimplifiedLayerNormalization``, ``GatherBlockQuantized``, 60
``past_key_values.N.key/value`` inputs and 60 ``present.N.key/value`` outputs, at tiny widths.
The test skips without the ``torch`` and ``llm`` extras (the fixture builds it with
onnxruntime-genai's model builder) and, like every browser test, without Chromium.

It checks what a reader sees: the view opens at the layers (one box each, in order down the
page, the KV cache inside its layer's box rather than 120 items at the top and bottom), a click
on a layer opens it into attention and MLP, and a click on the attention shows
``past_key_values.N`` beside the ``GroupQueryAttention`` that reads it and ``present.N`` beside
it on the way out. Screenshots: ``tests/artifacts/browser/decoder-view-*.png``.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from explorer.views.figures import NODES
from tests.browser.jupyter import (
    LabServer,
    cell_errors,
    click_plot_point,
    open_notebook,
    plotly_data,
    run_all,
    screenshot,
    wait_for_outputs,
    write_notebook,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.torch, pytest.mark.llm]

LAYERS = 30
PLOT = ".oge-graph-view .js-plotly-plot"


def _layer(n: int) -> str:
    return f"scope:model/layers.{n}"


def _drawn(page: Page) -> dict[str, tuple[float, float]]:
    """Item id -> (x, y) of every item the page draws (the nodes trace), as plotly holds them."""
    nodes = plotly_data(page)[NODES]
    return {
        item: (float(x), float(y))
        for item, x, y in zip(nodes["customdata"], nodes["x"], nodes["y"], strict=True)
    }


def _click(page: Page, item: str, shows: str) -> dict[str, tuple[float, float]]:
    """Click ``item`` with the mouse and wait until the page draws ``shows``; the items drawn then."""
    index = list(plotly_data(page)[NODES]["customdata"]).index(item)
    click_plot_point(page, plot_index=0, trace_index=NODES, point_index=index)
    page.wait_for_function(
        f"""(item) => Array.from(document.querySelector('{PLOT}').data[{NODES}].customdata).includes(item)""",
        arg=shows,
        timeout=30_000,
    )
    return _drawn(page)


def test_the_decoder_opens_at_its_layers_and_a_layer_opens_into_attention_and_mlp(
    genai_decoder_deep: Path, page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    cells = ["from widgets import GraphView", f"view = GraphView({str(genai_decoder_deep)!r})\nview"]
    open_notebook(page, lab, write_notebook(notebook_dir, "decoder.ipynb", cells))
    assert run_all(page), cell_errors(page)
    graph = wait_for_outputs(page, PLOT).first

    # opens at its layers: 30 boxes, one above the other in order, and little else
    drawn = _drawn(page)
    assert all(_layer(n) in drawn for n in range(LAYERS)), sorted(drawn)
    assert len(drawn) < LAYERS + 10, sorted(drawn)
    ys = [drawn[_layer(n)][1] for n in range(LAYERS)]
    assert all(a > b for a, b in itertools.pairwise(ys)), "layer N+1 is drawn below layer N"
    assert drawn["input:input_ids"][1] > ys[0] > ys[-1] > drawn["output:logits"][1]
    # the KV cache is drawn in its layer's box, not as 120 items at the top and the bottom, and the
    # box's hover says so
    assert not [item for item in drawn if "past_key_values" in item or "present." in item]
    nodes = plotly_data(page)[NODES]
    hover = nodes["hovertext"][list(nodes["customdata"]).index(_layer(7))]
    assert "past_key_values.7.key" in hover and "11 ops: " in hover, hover
    screenshot(page, "decoder-view-opened", graph)
    # the plot is as wide as its box, whenever it was drawn (plotly's default 700 px put its right
    # part under the details panel)
    plot, box = page.evaluate(
        f"""() => {{
            const gd = document.querySelector('{PLOT}');
            return [gd.getBoundingClientRect().width, gd.parentElement.getBoundingClientRect().width];
        }}"""
    )
    assert plot <= box + 1, (plot, box)

    # a click on a layer opens it into its attention and its MLP, between the layers around it
    n = 1
    opened = _click(page, _layer(n), f"{_layer(n)}/attn")
    attn, mlp = f"{_layer(n)}/attn", f"{_layer(n)}/mlp"
    assert {attn, mlp} <= set(opened) and _layer(n) not in opened
    assert opened[_layer(n - 1)][1] > opened[attn][1] > opened[mlp][1] > opened[_layer(n + 1)][1]

    # a click on the attention shows GroupQueryAttention with layer N's past beside it, its present after
    shown = _click(page, attn, f"/model/layers.{n}/attn/GroupQueryAttention")
    gqa = shown[f"/model/layers.{n}/attn/GroupQueryAttention"]
    above = shown[f"/model/layers.{n}/input_layernorm/SkipLayerNorm"][1]
    below = shown[f"/model/layers.{n}/post_attention_layernorm/SkipLayerNorm"][1]
    for kind in ("key", "value"):
        past, present = shown[f"input:past_key_values.{n}.{kind}"], shown[f"output:present.{n}.{kind}"]
        assert above > past[1] > gqa[1] > present[1] > below, (past, gqa, present)
    # and nowhere else: the other layers' KV stays in their boxes
    kv = sorted(item for item in shown if "past_key_values" in item or "present." in item)
    assert kv == sorted(
        f"{io}.{n}.{kind}" for io in ("input:past_key_values", "output:present") for kind in ("key", "value")
    )
    screenshot(page, "decoder-view-attention", graph)
    assert blocked_requests == []
