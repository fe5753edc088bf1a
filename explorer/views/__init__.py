"""Views: pure functions from results to pictures and pages.

The layered layout (:mod:`explorer.views.layout`), the plotly figures (graph, op
histogram, timeline, runtimes, targets), node boxes, node details, the QDQ view and
the headless HTML report. Views read the core, the adapters and the stages' results;
no stage imports a view, and nothing here imports Jupyter or :mod:`widgets`.

Examples
--------
>>> from explorer import load
>>> from explorer.views.details import details_html, node_details
>>> from explorer.views.figures import NODES, graph_figure, op_histogram_figure
>>> g = load("zoo:mlp")
>>> list(graph_figure(g).data[NODES].customdata[:3])
['input:input', '/Flatten', '/fc1/Gemm']
>>> op_histogram_figure(g.summary()).data[0].x[0]
'Gemm'
>>> 'data-node="/fc1/Gemm"' in details_html(node_details(g, "/fc1/Gemm"))
True
"""

__all__: list[str] = []
