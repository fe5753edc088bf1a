// Build the partial widget bundle: plotly.js from entry.js (esbuild, as plotly.js builds its own
// dist: node_modules/plotly.js/esbuild-config.js), put in place of the full plotly.js that plotly.py's
// widget bundle embeds (found with acorn: the lazy CommonJS wrapper that the statement before
// `window.PlotlyConfig = ...` calls). Everything else of plotly.py's bundle (its widget code, lodash)
// stays byte for byte.
//
// node build.js WIDGETBUNDLE.js PLOTLY_PY_VERSION OUT.js   (run by build.sh)
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const acorn = require('acorn');
const esbuild = require('esbuild');
const { environmentPlugin } = require('esbuild-plugin-environment');
const { glsl } = require('esbuild-plugin-glsl');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');

const [bundlePath, plotlyPyVersion, outPath] = process.argv.slice(2);
const TRACES = ['scatter', 'scattergl', 'bar', 'box', 'violin', 'heatmap'];

async function buildPlotly() {
  const result = await esbuild.build({
    entryPoints: [path.join(__dirname, 'entry.js')],
    write: false,
    format: 'cjs',
    bundle: true,
    minify: true,
    legalComments: 'eof',
    plugins: [InlineCSSPlugin(), glsl({ minify: true }), environmentPlugin({ NODE_DEBUG: false })],
    alias: { regl: '@plotly/regl', stream: 'stream-browserify' },
    define: { global: 'window', 'define.amd': 'false' },
    target: 'es2016',
    logLevel: 'warning',
  });
  return result.outputFiles[0].text;
}

function plotlyWrapper(code) {
  const ast = acorn.parse(code, { ecmaVersion: 'latest', sourceType: 'module' });
  let name = null;
  ast.body.forEach((statement, index) => {
    const next = ast.body[index + 1];
    if (statement.type === 'VariableDeclaration' && next && code.startsWith('window.PlotlyConfig', next.start)) {
      name = statement.declarations[0].init.arguments[0].callee.name; // var Md = dbe(LQ())
    }
  });
  if (name === null) throw new Error('no `var X = wrap(plotly())` before window.PlotlyConfig');
  for (const statement of ast.body) {
    for (const declaration of statement.declarations || []) {
      const init = declaration.init;
      if (declaration.id.name === name && init && init.type === 'CallExpression') {
        const factory = init.arguments[0];
        if (factory.type === 'ArrowFunctionExpression' && factory.params.length === 2) return factory;
      }
    }
  }
  throw new Error(`no CommonJS wrapper ${name}(exports, module)`);
}

async function main() {
const original = fs.readFileSync(bundlePath, 'utf8');
const factory = plotlyWrapper(original);
const [exportsName, moduleName] = factory.params.map((param) => param.name);
const embedded = original.slice(factory.body.start, factory.body.end);
const version = /plotly\.js v([0-9][^\s*]*)/.exec(embedded) || /version="([0-9.]+)"/.exec(embedded);
const partialPlotly = await buildPlotly();
const ownVersion = require('plotly.js/package.json').version;
if (version && version[1] !== ownVersion) {
  throw new Error(`plotly.py ${plotlyPyVersion} embeds plotly.js ${version[1]}; package.json has ${ownVersion}`);
}
const body = `{(function(module,exports){${partialPlotly}\n})(${moduleName},${exportsName})}`;
const out = original.slice(0, factory.body.start) + body + original.slice(factory.body.end);
fs.writeFileSync(outPath, out);
const sha256 = (text) => crypto.createHash('sha256').update(text).digest('hex');
const meta = {
  plotly_py: plotlyPyVersion,
  plotly_py_widgetbundle_sha256: sha256(original),
  plotly_js: ownVersion,
  traces: TRACES,
  bytes: Buffer.byteLength(out),
  sha256: sha256(out),
  built_by: 'scripts/plotly_bundle/build.sh',
};
fs.writeFileSync(outPath.replace(/\.js$/, '.json'), JSON.stringify(meta, null, 2) + '\n');
console.log(`plotly.js ${ownVersion}: ${embedded.length} -> ${partialPlotly.length} bytes; ${outPath}: ${out.length} bytes`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
