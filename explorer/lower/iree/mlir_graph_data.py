"""Read an MLIR module as graph data: ops as nodes, SSA values as edges, dispatch regions as scopes.

Runs where IREE's compiler package is (the worker). It parses MLIR text with the MLIR Python
bindings IREE ships (``iree.compiler.ir``) and returns plain records of
:mod:`explorer.core.graph_schema`, which :func:`explorer.lower.iree.mlir_adapter.mlir_graph` turns
into a graph model. What is drawn is the module's main function (the one holding the model's
work, outside the executables the compiler outlines kernels into):

- each op is a node (``op``: ``dialect.name``; ``domain``: the dialect, which the figures colour
  by), with its location's ONNX node names as ``origin``;
- each SSA value an op reads is an edge from the op that defined it, with its type (a tensor's
  shape and dtype; other types, such as ``!stream.resource``, spelled as MLIR writes them);
- constants (``arith.constant``, ``util.global.load``, the importer's ``onnx.Constant``) are
  no nodes: a tensor constant becomes a weight of the op that reads it, as ONNX initializers do;
- the ops inside a dispatch region (``flow.dispatch.region`` / ``flow.dispatch.workgroups``,
  what dispatch creation makes) or a stream execution region (``stream.cmd.execute``, its
  ``stream.cmd.concurrent`` groups) are scoped by it, so the group collapses into one box; the
  commands of a stream or HAL command buffer, which share one resource rather than passing
  tensors, are also linked in the order they run.

:func:`dialect_histogram` counts the ops of every dialect in the whole module (executables
included: that is where linalg turns into vector, then llvm).

Examples
--------
>>> text = '''
... func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
...   %0 = arith.addf %a, %b : tensor<4xf32> loc("/Add")
...   %1 = math.exp %0 : tensor<4xf32> loc("/Exp")
...   return %1 : tensor<4xf32>
... }'''
>>> data = mlir_graph_data(text, onnx_nodes=["/Add", "/Exp"])
>>> [(n, d["op"], d["origin"]) for n, d in data["nodes"] if d["kind"] == "op"]
[('%0', 'arith.addf', ('/Add',)), ('%1', 'math.exp', ('/Exp',))]
>>> dialect_histogram(text)
{'arith': 1, 'func': 2, 'math': 1}
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from explorer.core.graph_schema import edge_data, node_data
from explorer.core.node_ids import INPUT_PREFIX, OUTPUT_PREFIX
from explorer.core.tensors import TensorInfo
from explorer.core.unique_names import UniqueNames

__all__ = [
    "mlir_graph_data",
    "dialect_histogram",
    "dialects_in_text",
    "parse_module",
    "main_function",
    "location_names",
    "dispatch_symbols",
    "tensor_type",
    "value_type",
    "CONTAINER_OPS",
    "CONSTANT_OPS",
]

CONTAINER_OPS = frozenset(
    {
        "flow.dispatch.region",
        "flow.dispatch.workgroups",
        "stream.cmd.execute",
        "stream.cmd.concurrent",
        "stream.cmd.serial",
        "stream.async.execute",
        "stream.async.concurrent",
    }
)
"""Ops whose region is drawn as a group of its ops (a dispatch, an execution region)."""

CONSTANT_OPS = frozenset(
    {
        "arith.constant",
        "util.global.load",
        "torch.constant.none",
        "torch.constant.int",
        "torch.constant.float",
        "torch.constant.bool",
        "torch.constant.str",
        "torch.vtensor.literal",
        "hal.element_type",
        "hal.encoding_type",
        "hal.memory_type",
        "hal.buffer_usage",
        "tensor.empty",
    }
)
"""Ops drawn as no node: what they make is a weight of the op reading it (a tensor) or nothing."""

_SHAPE_ONLY = frozenset({"tensor.empty"})
"""Ops that make a tensor of a shape with no values (an init that kernels write into): no node, no weight."""

_CONSTANT_PREFIXES = ("vm.const.", "vm.global.load.", "vm.rodata")

_SEQUENCED_PREFIXES = ("stream.cmd.", "hal.command_buffer.")
"""Commands that share a resource or command buffer: linked in the order they run."""

_KERNEL_PREFIXES = ("linalg.", "iree_linalg_ext.", "tensor.pad", "tensor.concat", "tensor.extract_slice")
"""The ops of a kernel whose locations say which ONNX nodes it computes (not its constants, which
the compiler shares between kernels, nor its loads and stores)."""

_NOT_KERNEL_WORK = frozenset({"linalg.fill", "linalg.yield", "linalg.index"})
"""Zero-fills and region bookkeeping: shared between kernels, they say nothing of where one came from."""

_EXECUTABLES = frozenset({"flow.executable", "stream.executable", "hal.executable"})
_FUNCTIONS = frozenset({"func.func", "util.func", "vm.func"})

_DTYPES = {
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "i1": "bool",
    "i8": "int8",
    "si8": "int8",
    "ui8": "uint8",
    "i16": "int16",
    "si16": "int16",
    "i32": "int32",
    "si32": "int32",
    "ui32": "uint32",
    "i64": "int64",
    "si64": "int64",
    "index": "index",
}
_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "bool": 1, "int8": 1, "uint8": 1}
_BYTES |= {"int16": 2, "int32": 4, "uint32": 4, "int64": 8, "index": 8}

_TORCH_TENSOR = re.compile(r"^!torch\.vtensor<\[([^\]]*)\],(\w+)>$")
_BUILTIN_TENSOR = re.compile(r"^(?:tensor|vector)<((?:[\d?]+x)*)(\w+)(?:,.*)?>$")


def tensor_type(text: str) -> tuple[tuple[int | str, ...], str] | None:
    """A tensor type's shape and dtype (``!torch.vtensor<[1,3],f32>``, ``tensor<1x3xf32>``), or None.

    Examples
    --------
    >>> tensor_type("!torch.vtensor<[1,64,?],f32>"), tensor_type("tensor<2x?xi64>"), tensor_type("index")
    (((1, 64, '?'), 'float32'), ((2, '?'), 'int64'), None)
    """
    found = _TORCH_TENSOR.match(text)
    if found is not None:
        dims = [d.strip() for d in found.group(1).split(",") if d.strip()]
        element = found.group(2)
    else:
        found = _BUILTIN_TENSOR.match(text)
        if found is None:
            return None
        dims = [d for d in found.group(1).split("x") if d]
        element = found.group(2)
    shape = tuple(int(d) if d.lstrip("-").isdigit() and int(d) >= 0 else "?" for d in dims)
    return shape, _DTYPES.get(element, element)


def value_type(type_text: str) -> tuple[tuple[int | str, ...] | None, str]:
    """``(shape, dtype)`` of a value's type: a tensor's (:func:`tensor_type`), else ``(None, the type
    as MLIR writes it)`` (``!hal.buffer_view``, ``index``).

    Examples
    --------
    >>> value_type("tensor<2xf32>"), value_type("!hal.fence")
    (((2,), 'float32'), (None, '!hal.fence'))
    """
    parsed = tensor_type(type_text)
    return parsed if parsed is not None else (None, type_text)


def _nbytes(shape: tuple[int | str, ...], dtype: str) -> int | None:
    if dtype not in _BYTES or any(not isinstance(d, int) for d in shape):
        return None
    count = 1
    for dim in shape:
        count *= int(dim)
    return count * _BYTES[dtype]


def parse_module(text: str) -> Any:
    """Parse MLIR text in a fresh context (unregistered dialects allowed); returns ``(context, module)``.

    Raises
    ------
    ValueError
        When the text does not parse, with MLIR's diagnostics.

    Examples
    --------
    >>> _, module = parse_module("func.func @f() { return }")
    >>> module.operation.name
    'builtin.module'
    """
    from iree.compiler import ir

    context = ir.Context()
    context.allow_unregistered_dialects = True
    with context:
        try:
            return context, ir.Module.parse(text)
        except ir.MLIRError as err:
            raise ValueError(f"the MLIR does not parse: {err}") from None


def _walk(op: Any, skip: frozenset[str] = frozenset()) -> Iterator[Any]:
    """Every op nested in ``op`` (pre-order, ``op`` included), not entering ops named in ``skip``."""
    yield op
    if op.name in skip:
        return
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                yield from _walk(child.operation, skip)


def main_function(module: Any) -> Any:
    """The function that holds the model's work: of the functions outside any executable, the one
    that launches the most kernels (dispatches; after HAL, where command buffers are recorded),
    then the one with the most ops (the importer's single function; the model's ``$async`` one).

    Examples
    --------
    >>> text = "func.func @a() { return }  func.func @b(%x: i32) -> i32 { return %x : i32 }"
    >>> _, module = parse_module(text)
    >>> str(main_function(module).attributes["sym_name"])
    '"a"'
    """
    best, best_score = None, (-1, -1)
    for op in _walk(module.operation, _EXECUTABLES):
        if op.name in _FUNCTIONS:
            ops = list(_walk(op))
            score = (sum(1 for o in ops if _launches_kernel(o)), len(ops))
            if score > best_score:
                best, best_score = op, score
    if best is None:
        raise ValueError("the MLIR module has no function")
    return best


def _launches_kernel(op: Any) -> bool:
    """A dispatch (flow, stream, HAL), or the VM's call of the HAL module's dispatch."""
    name = op.name
    if name.startswith("vm.call"):
        return "dispatch" in str(op.attributes["callee"]) if "callee" in op.attributes else False
    return name.endswith(".dispatch")


def location_names(location: Any) -> list[str]:
    """The names in an MLIR location (``loc("/conv1/Conv")``; fused, call-site and nested ones).

    Examples
    --------
    >>> from iree.compiler import ir
    >>> with ir.Context():
    ...     loc = ir.Location.fused([ir.Location.name("/a/Conv"), ir.Location.name("/a/Relu")])
    ...     location_names(loc)
    ['/a/Conv', '/a/Relu']
    """
    from iree.compiler import ir

    names: list[str] = []

    def visit(loc: Any) -> None:
        if isinstance(loc, ir.NameLoc):
            names.append(loc.name_str)
            visit(loc.child_loc)
        elif isinstance(loc, ir.FusedLoc):
            for inner in loc.locations:
                visit(inner)
        elif isinstance(loc, ir.CallSiteLoc):
            visit(loc.callee)

    visit(location)
    return list(dict.fromkeys(names))


def dialect_histogram(text_or_module: Any) -> dict[str, int]:
    """Ops per dialect in a whole module (its executables included), dialects in alphabetical order.

    Examples
    --------
    >>> dialect_histogram("func.func @f(%x: i32) -> i32 { %0 = arith.addi %x, %x : i32 return %0 : i32 }")
    {'arith': 1, 'func': 2}
    """
    if isinstance(text_or_module, str):
        context, module = parse_module(text_or_module)
        with context:
            return dialect_histogram(module)
    counts = Counter(op.name.split(".", 1)[0] for op in _walk(text_or_module.operation))
    counts.pop("builtin", None)
    return dict(sorted(counts.items()))


_OP_TOKEN = re.compile(r'(?:^\s*|= |^\s*"?)"?([a-z_][a-z0-9_]*)\.[a-z_][\w.]*', re.MULTILINE)


def dialects_in_text(text: str) -> dict[str, int]:
    """Ops per dialect counted in MLIR text without parsing it: a piece of a module, or a dump MLIR's
    parser refuses (:func:`dialect_histogram` when the text parses).

    Examples
    --------
    >>> dialects_in_text("%0 = arith.addi %a, %b : i32\\n  %1 = arith.muli %0, %0 : i32\\n  vm.return")
    {'arith': 2, 'vm': 1}
    """
    counts: Counter[str] = Counter(_OP_TOKEN.findall(text))
    counts.pop("builtin", None)
    return dict(sorted(counts.items()))


def _is_constant(op: Any) -> bool:
    name = op.name
    if name in CONSTANT_OPS or name.startswith(_CONSTANT_PREFIXES):
        return True
    return name == "torch.operator" and _torch_op(op) == "onnx.Constant"


def _torch_op(op: Any) -> str:
    attribute = op.attributes.get("name", None)
    return getattr(attribute, "value", str(attribute)) if attribute is not None else "torch.operator"


def _op_names(op: Any) -> tuple[str, str, str]:
    """``(op, op_type, dialect)``: ``torch.operator "onnx.Conv"`` reads as the ONNX op it holds."""
    name = op.name
    dialect = name.split(".", 1)[0]
    if name == "torch.operator":
        onnx_op = _torch_op(op)
        return f"torch.{onnx_op}", onnx_op, dialect
    if name == "vm.call" or name == "vm.call.variadic":
        callee = str(op.attributes["callee"]).lstrip("@") if "callee" in op.attributes else ""
        if callee:
            return name, f"vm.call @{callee}", dialect
    return name, name, dialect


_ATTRIBUTE_LIMIT = 120
_HIDDEN_ATTRIBUTES = frozenset({"operandSegmentSizes", "resultSegmentSizes", "name", "sym_name"})


def _attributes(op: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for key in op.attributes:
        if key in _HIDDEN_ATTRIBUTES:
            continue
        text = str(op.attributes[key])
        if len(text) <= _ATTRIBUTE_LIMIT:
            out[key] = text.strip('"')
    return out


def dispatch_symbols(op: Any) -> tuple[str, str] | None:
    """``(executable, export)`` a dispatch op calls (``flow.dispatch @exe::@entry``, later
    ``@exe::@variant::@entry``; the first of several), or None for any other op.

    Examples
    --------
    >>> call = '"flow.dispatch"() {entry_points = [@"m$d_0"::@"m$d_0_conv"]} : () -> ()'
    >>> text = "func.func @f() { " + call + " return }"
    >>> _, module = parse_module(text)
    >>> dispatch_symbols(next(o for o in _walk(module.operation) if o.name == "flow.dispatch"))
    ('m$d_0', 'm$d_0_conv')
    """
    for key in ("entry_points", "entry_point"):
        if key in op.attributes:
            first = str(op.attributes[key]).strip("[]").split(",")[0].strip()
            parts = [part.strip().lstrip("@").strip('"') for part in first.split("::")]
            return parts[0], parts[-1]
    return None


class _Builder:
    """Walk the main function once, collecting node and edge records."""

    def __init__(self, module: Any, known: set[str]) -> None:
        from iree.compiler import ir

        self.ir = ir
        self.state = ir.AsmState(module.operation)
        self.known = known
        self.names = UniqueNames()
        self.nodes: list[tuple[str, dict[str, Any]]] = []
        self.edges: list[tuple[str, str, str, dict[str, Any]]] = []
        self.edge_index: dict[tuple[str, str, str], int] = {}
        self.producer: dict[Any, str] = {}  # value -> node id that defines it
        self.constants: dict[Any, TensorInfo | None] = {}  # value -> weight (None: a scalar)
        self.group_count = Counter[str]()
        self.kernel_origins = self.executable_origins(module)

    def executable_origins(self, module: Any) -> dict[str, tuple[str, ...]]:
        """Executable name -> the ONNX nodes its ops' locations name (all that a dispatch fused)."""
        found: dict[str, tuple[str, ...]] = {}
        for child in module.body.operations:
            op = child.operation
            if op.name in _EXECUTABLES and "sym_name" in op.attributes:
                names = (
                    n
                    for inner in _walk(op)
                    if inner.name.startswith(_KERNEL_PREFIXES) and inner.name not in _NOT_KERNEL_WORK
                    for n in location_names(inner.location)
                )
                symbol = op.attributes["sym_name"]
                found[getattr(symbol, "value", str(symbol))] = tuple(
                    dict.fromkeys(n for n in names if n in self.known)
                )
        return found

    def value_name(self, value: Any) -> str:
        return value.get_name(self.state)

    def edge(self, source: str, target: str, value: Any, slot: int) -> None:
        """An edge keyed by the value's SSA name; a value read twice by one op has both slots."""
        name = self.value_name(value)
        known = self.edge_index.get((source, target, name))
        if known is not None:
            record = self.edges[known][3]
            record["slots"] = (*record["slots"], slot)
            return
        shape, dtype = value_type(str(value.type))
        nbytes = _nbytes(shape, dtype) if shape is not None else None
        record = edge_data(name, shape, dtype, nbytes, slots=(slot,))
        self.edge_index[(source, target, name)] = len(self.edges)
        self.edges.append((source, target, name, record))

    def origin(self, op: Any) -> tuple[str, ...]:
        own = [n for n in location_names(op.location) if n in self.known]
        symbols = dispatch_symbols(op)
        if symbols is not None:  # a dispatch: every ONNX node its kernel fused
            own += self.kernel_origins.get(symbols[0], ())
        return tuple(dict.fromkeys(own))

    def constant(self, op: Any) -> None:
        for result in op.results:
            if op.name in _SHAPE_ONLY:
                self.constants[result] = None
                continue
            parsed = tensor_type(str(result.type))
            if parsed is None:
                self.constants[result] = None
                continue
            shape, dtype = parsed
            numel = 1
            for dim in shape:
                numel *= dim if isinstance(dim, int) else 0
            label = location_names(op.location)
            name = label[0] if label else self.value_name(result)
            self.constants[result] = TensorInfo(
                name,
                tuple(int(d) if isinstance(d, int) else -1 for d in shape),
                dtype,
                numel,
                _nbytes(shape, dtype) or 0,
                source="constant",
            )

    def add_inputs(self, function: Any) -> None:
        block = function.regions[0].blocks[0]
        for argument in block.arguments:
            name = self.value_name(argument)
            node = INPUT_PREFIX + name
            shape, dtype = value_type(str(argument.type))
            self.nodes.append(
                (node, node_data("input", "Input", name, outputs=[name], shape=shape, dtype=dtype))
            )
            self.producer[argument] = node

    def group_name(self, op: Any) -> str:
        """A container's scope name: ``dispatch_3_conv_2d`` (its main linalg op), ``execute_0``."""
        if op.name.startswith("flow.dispatch"):
            base = "dispatch"
            linalg = [o.name.split(".", 1)[1] for o in _walk(op) if o.name.startswith("linalg.")]
            named = [n for n in linalg if n not in ("fill", "yield", "generic", "index")]
            label = (named or linalg or [""])[0]
            number = self.group_count[base]
            self.group_count[base] += 1
            return f"{base}_{number}_{label}" if label else f"{base}_{number}"
        base = op.name.rsplit(".", 1)[-1]
        number = self.group_count[base]
        self.group_count[base] += 1
        return f"{base}_{number}"

    def block(self, block: Any, scope: tuple[str, ...]) -> list[str]:
        """Add a block's ops; returns the node ids made in it (in order)."""
        made: list[str] = []
        last_ran: list[str] = []  # the command (or concurrent commands) that ran last in this block
        for child in block.operations:
            op = child.operation
            name = op.name
            if _is_constant(op):
                self.constant(op)
                continue
            if name in CONTAINER_OPS:
                inner = self.container(op, scope)
                made.extend(inner)
                if inner and name.startswith("stream.cmd."):
                    last_ran = self.sequence(last_ran, inner if name.endswith("concurrent") else inner[:1])
                    last_ran = inner if name.endswith("concurrent") else inner[-1:]
                continue
            if (not op.results and name.endswith(("return", "yield", "_end"))) or name == "flow.return":
                continue
            node = self.op_node(op, scope)
            made.append(node)
            if name.startswith(_SEQUENCED_PREFIXES) or (
                name.startswith("vm.call") and "command_buffer" in str(op.attributes.get("callee", ""))
            ):
                last_ran = self.sequence(last_ran, [node])
        return made

    def sequence(self, ran: list[str], now: list[str]) -> list[str]:
        """Link the commands that ran last to those that run now (an ``order`` edge, no tensor)."""
        for source in ran:
            for target in now:
                if source != target:
                    self.edges.append((source, target, "order", edge_data("", None, "order", None)))
        return now

    def container(self, op: Any, scope: tuple[str, ...]) -> list[str]:
        group = (*scope, self.group_name(op))
        operands = list(op.operands)
        made: list[str] = []
        # a dispatch's second region computes its workgroup count: bookkeeping, not drawn
        for region in list(op.regions)[:1]:
            for block in region.blocks:
                for index, argument in enumerate(block.arguments):
                    if index < len(operands):
                        self.alias(argument, operands[index])
                made.extend(self.block(block, group))
        last = made[-1] if made else None
        for result in op.results:
            if last is not None:
                self.producer[result] = last
        return made

    def alias(self, value: Any, source: Any) -> None:
        if source in self.producer:
            self.producer[value] = self.producer[source]
        elif source in self.constants:
            self.constants[value] = self.constants[source]

    def op_node(self, op: Any, scope: tuple[str, ...]) -> str:
        qualified, op_type, dialect = _op_names(op)
        results = list(op.results)
        base = self.value_name(results[0]) if results else qualified
        node = self.names(base)
        symbols = dispatch_symbols(op)
        entry = symbols[1] if symbols is not None else None
        locations = location_names(op.location)
        label = entry or (locations[0] if locations else node)
        weights = []
        inputs = []
        for slot, operand in enumerate(op.operands):
            inputs.append(self.value_name(operand))
            if operand in self.producer:
                self.edge(self.producer[operand], node, operand, slot)
            elif self.constants.get(operand) is not None:
                weights.append(self.constants[operand])
        attributes = _attributes(op)
        nested = sum(1 for _ in _walk(op)) - 1
        if nested:
            attributes["nested ops"] = str(nested)
        self.nodes.append(
            (
                node,
                node_data(
                    "op",
                    op_type,
                    label,
                    domain=dialect,
                    op=qualified,
                    index=len(self.nodes),
                    attributes=attributes,
                    inputs=inputs,
                    outputs=[self.value_name(r) for r in results],
                    scope=scope,
                    weights=weights,
                    origin=self.origin(op),
                ),
            )
        )
        for result in results:
            self.producer[result] = node
        return node

    def add_outputs(self, function: Any) -> None:
        """The function's results: what its (last) return gives back, from whichever block returns."""
        last_ops = [list(block.operations)[-1].operation for block in function.regions[0].blocks]
        returns = [op for op in last_ops if op.name.endswith("return")]
        if not returns:
            return
        terminator = returns[-1]
        for slot, value in enumerate(terminator.operands):
            name = self.value_name(value)
            node = OUTPUT_PREFIX + name
            shape, dtype = value_type(str(value.type))
            self.nodes.append(
                (node, node_data("output", "Output", name, inputs=[name], shape=shape, dtype=dtype))
            )
            if value in self.producer:
                self.edge(self.producer[value], node, value, slot)


def mlir_graph_data(text: Any, *, onnx_nodes: Iterable[str] = ()) -> dict[str, Any]:
    """The main function of an MLIR module as graph-model records (see the module docstring).

    Parameters
    ----------
    text : str or module
        MLIR text, with locations (``--mlir-print-debuginfo``; elided weights are fine), or a module
        :func:`parse_module` parsed (read in its context).
    onnx_nodes : iterable of str
        The ONNX graph's node names: a location naming one of them becomes the op's ``origin``.

    Returns
    -------
    dict
        ``name`` (the function), ``nodes`` and ``edges`` (graph-schema records), ``dialects``
        (:func:`dialect_histogram` of the whole module).

    Examples
    --------
    >>> text = "func.func @f(%x: i32) -> i32 { %0 = arith.addi %x, %x : i32 return %0 : i32 }"
    >>> data = mlir_graph_data(text)
    >>> data["name"], [n for n, _ in data["nodes"]], [(u, v, e["slots"]) for u, v, _, e in data["edges"]]
    ('f', ['input:%arg0', '%0', 'output:%0'], [('input:%arg0', '%0', (0, 1)), ('%0', 'output:%0', (0,))])
    """
    if isinstance(text, str):
        context, module = parse_module(text)
        with context:
            return mlir_graph_data(module, onnx_nodes=onnx_nodes)
    module = text
    function = main_function(module)
    builder = _Builder(module, set(onnx_nodes))
    builder.add_inputs(function)
    for block in function.regions[0].blocks:  # one block, or the VM's branches after control flow
        builder.block(block, ())
    builder.add_outputs(function)
    name = function.attributes["sym_name"]
    return {
        "name": getattr(name, "value", str(name)),
        "nodes": builder.nodes,
        "edges": builder.edges,
        "dialects": dialect_histogram(module),
    }
