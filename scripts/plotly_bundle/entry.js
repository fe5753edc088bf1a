// plotly.js with the trace types onnx-graph-explorer's figures use (explorer/views/figures/,
// explorer/views/runtime_figures.py, target_figures.py): scatter (in the core), scattergl, bar, box, violin, heatmap.
// Keep in step with PARTIAL_TRACES in widgets/plotly_bundle.py.
'use strict';
var Plotly = require('plotly.js/lib/core');

Plotly.register([
    require('plotly.js/lib/scattergl'),
    require('plotly.js/lib/bar'),
    require('plotly.js/lib/box'),
    require('plotly.js/lib/violin'),
    require('plotly.js/lib/heatmap'),
]);

module.exports = Plotly;
