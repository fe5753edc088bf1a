"""Plain-English explanations of every pass, written for a learner, keyed by registry name.

Each paragraph says what the pass rewrites (the exact pattern), when that pattern shows up in
exported models, and what can go wrong. They were written from the passes' sources
(onnxoptimizer 0.4.2's ``passes/*.h``, onnxsim 0.8.1's ``onnxsim.cpp``, ONNX Runtime's
``graph_transformer_utils.cc``, onnxscript 0.7.2's ``optimizer`` and ``rewriter/ort_fusions``,
ONNX Runtime 1.32's ``onnxruntime/transformers``) and checked by running the passes on small
models (the zoo transformer for the onnxscript fusions and the transformer optimizer).

Examples
--------
>>> from explorer.passes.descriptions import FAMILIES, ONNXOPTIMIZER, ONNXOPTIMIZER_KIND
>>> "fuse_bn_into_conv" in ONNXOPTIMIZER
True
>>> ONNXOPTIMIZER_KIND["fuse_bn_into_conv"]
'fuse'
>>> sorted(FAMILIES)
['explorer', 'onnx', 'onnxoptimizer', 'onnxscript', 'onnxsim', 'ort', 'ort-quant', 'ort-transformers']
"""

from __future__ import annotations

__all__ = [
    "ONNXOPTIMIZER",
    "ONNXOPTIMIZER_KIND",
    "ONNXSIM",
    "ORT",
    "VERSION_CONVERTER",
    "EXPLORER",
    "ORT_QUANT",
    "ONNXSCRIPT",
    "ONNXSCRIPT_KIND",
    "ort_transformers",
    "FAMILIES",
    "KINDS",
]

KINDS: tuple[str, ...] = ("fuse", "eliminate", "rewrite", "rename", "split", "utility")
"""The values used in :data:`ONNXOPTIMIZER_KIND`."""

ONNXOPTIMIZER: dict[str, str] = {
    "adjust_add": (
        "Swaps the two inputs of an Add whose first input is a constant (an initializer or Constant "
        "node) and whose second is not, so Add(bias, MatMul(x, W)) becomes Add(MatMul(x, W), bias). "
        "Nothing is computed differently; the point is that later fusions only look at the first "
        "input: fuse_matmul_add_bias_into_gemm and fuse_add_bias_into_conv need the MatMul or Conv on "
        "the left, and the source notes that TensorRT only fuses a bias Add in that order. Exporters "
        "that write `bias + x @ W` leave the constant first. It is not in the fuse_and_eliminate "
        "preset, so run it before the fusions it is meant to unlock."
    ),
    "rename_input_output": (
        "Renames the graph inputs to input_0, input_1, ... and the outputs to output_0, output_1, ... "
        "(the patterns can be changed through the environment variables OPTIMIZER_RENAME_INPUT_PATTERN "
        "and OPTIMIZER_RENAME_OUTPUT_PATTERN, which must contain %d); inputs that are also initializers "
        "keep their names. Only names change, nothing is computed differently, but the model's "
        "interface does: code that feeds inputs or reads outputs by their old names breaks. It is not "
        "an optimisation and is not in the preset."
    ),
    "set_unique_name_for_nodes": (
        "Gives every node that has no name a unique one (a number taken from the IR's counter); nodes "
        "that already have a name keep it. Only names change, so the computation is identical. It "
        "helps tools that key on node names, such as profilers, quantisers and graph diffs, because "
        "many exporters leave nodes unnamed. Not in the preset."
    ),
    "nop": (
        "Does nothing: an empty pass, registered so that pipelines and tests have one that is sure to "
        "leave the graph alone. Running it shows the effect of a round trip through onnxoptimizer's "
        "in-memory IR by itself, which is normally none (a model with IR version 3 is raised to 4). "
        "It appears in the fuse_and_eliminate preset only because the preset takes every pass "
        "registered as a no-op or fuse type."
    ),
    "eliminate_nop_cast": (
        "Removes a Cast whose target type (`to`) is the type its input already has, connecting the "
        "input straight to the Cast's consumers. Exporters emit such Casts when framework code casts "
        "defensively, e.g. `x.float()` on a tensor that is already float. The input's type must be "
        "known: graph inputs and initializers carry one, but intermediate values only do once shape "
        "inference has filled value_info, so without it the pass finds nothing. Like the other "
        "eliminations it keeps a node that links a graph input directly to a graph output, whose names "
        "must survive."
    ),
    "eliminate_nop_dropout": (
        "Removes a Dropout whose `ratio` attribute is exactly 0, passing its input through. Only the "
        "old form matches: from opset 12 the ratio is an input, and the source deliberately leaves "
        "those Dropouts alone because training-ready models need them; a Dropout with the default "
        "ratio 0.5 is also kept, although at inference time every Dropout is an identity. PyTorch's "
        "eval-mode export already drops Dropout and ONNX Runtime's basic level removes the rest, so on "
        "modern models this pass rarely fires."
    ),
    "eliminate_nop_flatten": (
        "Removes a Flatten that cannot change its input: the input is already 2-D and axis is 1 (or "
        "-1), or axis is 0 and the first dimension is 1. Classifier heads exported as `x.flatten(1)` "
        "after a pooling step that already produced [N, C] leave such Flattens. The input's shape must "
        "be known, so shape inference has to have run."
    ),
    "extract_constant_to_initializer": (
        "Turns every Constant node that holds a `value` tensor into a graph initializer of the same "
        "name and deletes the node. The values are identical; the graph gets shorter and all "
        "constants live in one place, which is how many tools and older runtimes expect them. "
        "PyTorch's exporter writes shape vectors and small scalars as Constant nodes. Constants given "
        "through value_float, value_ints and the other typed attributes are not moved, and onnxsim "
        "always leaves this pass out because it keeps Constant nodes as nodes."
    ),
    "eliminate_consecutive_idempotent_ops": (
        "When an idempotent op (applying it twice is the same as once) feeds straight into another "
        "copy of itself, the second copy is rewired to read the first one's input: Relu, Ceil, Floor, "
        "Round and Sign, and Reshape, where only the second target shape matters. The first node "
        "must have no other consumer, and it is left behind unconnected until eliminate_deadend runs "
        "(the preset does). Doubled activations appear when modules that each end in a ReLU are "
        "stacked; doubled Reshapes come from chains of view() calls."
    ),
    "eliminate_if_with_const_cond": (
        "Replaces an If node whose condition is a Constant node or an initializer by the nodes of the "
        "branch it selects, copied into the parent graph together with the branch's initializers and "
        "its references to outer values. Such Ifs come from scripted control flow that tests a flag "
        "fixed at export time (torch.jit.script models, TensorFlow conds on Python booleans). A "
        "condition computed at run time is not matched, even one that constant folding could decide, "
        "until it has been folded into a constant."
    ),
    "eliminate_nop_monotone_argmax": (
        "Drops a monotonically increasing function in front of an ArgMax, since it cannot change which "
        "index holds the largest value: ArgMax of Log, Exp, Sqrt, Softmax or LogSoftmax of x becomes "
        "ArgMax of x. The typical case is a classifier exported with Softmax followed by ArgMax. "
        "ArgMax needs an explicit axis, Softmax/LogSoftmax need an explicit axis equal to it (one "
        "relying on the default axis is not matched), and the function's output must have no other "
        "consumer. Inputs outside the function's domain (negative values under Log or Sqrt give NaN) "
        "are assumed not to occur."
    ),
    "eliminate_nop_pad": (
        "Removes a Pad whose pads (an attribute before opset 11, a constant input after) are all zero. "
        "Exporters leave these when they always emit a Pad for a padding argument, e.g. `F.pad` with "
        "zero widths or 'same' padding computed for a 1x1 kernel. A pads tensor computed at run time "
        "is not constant, so such a Pad stays."
    ),
    "eliminate_nop_concat": (
        "Removes a Concat with exactly one input, which only copies it. Exporters leave these when "
        "`torch.cat` is called on a list that happens to hold a single tensor. Empty (zero-element) "
        "constant inputs of a Concat are dropped by eliminate_nop_with_unit, which can turn a Concat "
        "into this one-input case."
    ),
    "eliminate_nop_split": (
        "Removes a Split with a single output that covers the whole split axis (no sizes given, or a "
        "size equal to the axis length), so it only copies its input. Exporters leave these when "
        "`torch.split` or `chunk` yields one piece. The input's shape must be known from shape "
        "inference."
    ),
    "eliminate_nop_expand": (
        "Removes an Expand whose constant target shape would not enlarge its input: every target "
        "dimension is 1 or equal to the input's, so broadcasting changes nothing. `expand_as` and "
        "broadcasting helpers export these even when the shapes already agree. The target shape must "
        "be a constant and the input's shape known; an Expand that really broadcasts is kept."
    ),
    "eliminate_shape_gather": (
        "Replaces Gather(Shape(x), i) by a constant int64 tensor when dimension i of x is a known "
        "number (Shape's start/end attributes are honoured). This is how PyTorch exports `x.size(1)`, "
        "all over dynamic-shape models; once it is a constant, the Unsqueeze/Concat/Reshape chain that "
        "uses it can fold. It needs x's shape from shape inference and leaves dynamic dimensions, such "
        "as a symbolic batch, alone. onnxsim never runs it: its source says the pass aborted on some "
        "dynamic-shape detection models, and onnxsim's own partial shape evaluation does the same job."
    ),
    "eliminate_slice_after_shape": (
        "Replaces Slice(Shape(x), starts, ends[, axes, steps]) by a constant int64 vector when every "
        "selected dimension of x is a known number, which is how `x.shape[1:]` or `x.shape[-2:]` "
        "export. The starts, ends and steps must each be a single constant value (attributes before "
        "opset 10, inputs after). One dynamic dimension inside the slice keeps the whole Slice."
    ),
    "eliminate_nop_transpose": (
        "Removes a Transpose whose perm is the identity (0, 1, 2, ...). Exporters rarely write these "
        "directly; they appear after fuse_consecutive_transposes composes a Transpose with its inverse, "
        "as in NCHW -> NHWC -> NCHW round trips of TensorFlow-converted models. A Transpose without a "
        "perm attribute reverses the axes, so it is kept."
    ),
    "fuse_add_bias_into_conv": (
        "Folds Add(Conv(x, W), b) into Conv(x, W, b) when the Conv has no bias yet, b is a constant "
        "(initializer or Constant node) and b holds one value per output channel (shape [M], [M,1,1], "
        "[1,M,1,1], ...) or a single scalar. Exporters produce this pattern when a framework adds the "
        "bias as a separate op, as in TensorFlow/Keras conversions or a bias-free Conv followed by a "
        "learnt offset. The Conv must be the Add's first input (adjust_add swaps it there) and must "
        "feed only the Add. The bias is reshaped by an inserted Squeeze (Unsqueeze and Tile for a "
        "scalar), which constant folding then removes."
    ),
    "fuse_bn_into_conv": (
        "BatchNormalization (inference mode) directly after a Conv is folded into the Conv's weights "
        "and bias: W' = W * gamma / sqrt(var + eps) per output channel and b' = (b - mean) * gamma / "
        "sqrt(var + eps) + beta. It is the classic win for CNNs exported in eval mode from PyTorch or "
        "Keras, where every Conv is followed by a BN. It only matches when all BN parameters and the "
        "Conv's weight (and bias, if any) are constants and the Conv's output has no other consumer. "
        "In onnxoptimizer 0.4.2 the pass does not compute W' and b' itself: it inserts a small chain "
        "of Cast/Add/Sqrt/Div/Unsqueeze/Mul/Sub nodes over the constants, so a single Conv with two new "
        "initializers only appears after constant folding (onnxsim does that), and the folded weights "
        "differ from the unfused computation by float rounding only."
    ),
    "fuse_consecutive_concats": (
        "Flattens nested Concats on the same axis: Concat(a, Concat(b, c), d) becomes Concat(a, b, c, "
        "d), keeping the order. The inner Concat must have no other consumer and both need an explicit "
        "axis. Nested concatenations come from code that builds lists step by step, such as feature "
        "pyramids or shape vectors assembled piece by piece."
    ),
    "fuse_consecutive_log_softmax": (
        "Replaces Log(Softmax(x)) by LogSoftmax(x) on the same axis: one kernel instead of two, and "
        "numerically safer because it never takes the logarithm of a probability that underflowed to "
        "0. Exporters emit the pair when code calls `torch.log(torch.softmax(x))` instead of "
        "`log_softmax`, and the Softmax must feed only the Log. Pitfall: in onnxoptimizer 0.4.2 the "
        "pass reads the Softmax's axis attribute without a default and fails with \"required undefined "
        "attribute 'axis'\" when the Softmax relies on the default axis, which makes the whole "
        "fuse_and_eliminate preset, and onnxsim, fail on such a model."
    ),
    "fuse_consecutive_reduce_unsqueeze": (
        "Turns a reduction with keepdims=0 followed by an Unsqueeze on the very same axes into the "
        "reduction with keepdims=1 and no Unsqueeze (ReduceSum, ReduceMean, ReduceMax, ReduceMin, "
        "ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare). The pair "
        "appears when code reduces and then re-adds the axis to broadcast against the input, e.g. "
        "`x.mean(1).unsqueeze(1)`. The axes must be constant and equal on both nodes, keepdims=0 must "
        "be explicit, and the reduction must feed only the Unsqueeze."
    ),
    "fuse_consecutive_squeezes": (
        "Merges Squeeze(Squeeze(x, a1), a2) into one Squeeze whose axes are a1 plus a2 translated back "
        "to x's original numbering. Both Squeezes need explicit axes (an attribute before opset 13, a "
        "constant input from 13). Such chains come from repeated `.squeeze(dim)` calls; the first "
        "Squeeze is deleted only if nothing else reads it."
    ),
    "fuse_consecutive_transposes": (
        "Composes Transpose(Transpose(x, p1), p2) into one Transpose with the combined permutation; "
        "when the two cancel, the result is an identity Transpose that eliminate_nop_transpose then "
        "removes. Layout round trips such as NCHW -> NHWC -> NCHW are common in models converted from "
        "TensorFlow or passed through layout-changing tools. Two Transposes without perm attributes "
        "(each reverses the axes) are removed together, and the first Transpose stays if something "
        "else still reads it."
    ),
    "fuse_matmul_add_bias_into_gemm": (
        "Turns Add(MatMul(A, B), C) into Gemm(A, B, C) with alpha = beta = 1. It only matches the 2-D "
        "case: A and B must be 2-D with A's first dimension a known number, C must be [N] or [M or 1, "
        "N], the MatMul must be the Add's first input (see adjust_add) and must feed only the Add. That "
        "fits Linear layers exported with a fixed batch, but not transformer activations of shape "
        "[batch, seq, hidden] nor a symbolic batch; ONNX Runtime's basic level and this onnxsim build "
        "turn 3-D cases into Reshape -> Gemm -> Reshape instead. The old MatMul is left unconnected until "
        "eliminate_deadend runs."
    ),
    "fuse_pad_into_conv": (
        "Absorbs a Pad in constant mode with value 0 that pads only spatial dimensions (not batch or "
        "channel, and no negative pads) into the following Conv's pads attribute, adding to any "
        "padding the Conv already has; the result is exact. TensorFlow exports with explicit or 'SAME' "
        "padding and PyTorch's `F.pad` before a Conv produce this pattern. The Pad must feed only the "
        "Conv, and a Conv whose auto_pad is set (not NOTSET) is left alone."
    ),
    "fuse_pad_into_pool": (
        "Does the same for MaxPool and AveragePool: a zero-valued constant-mode Pad on spatial "
        "dimensions moves into the pool's pads, and for AveragePool count_include_pad is set to 1 so "
        "the padded zeros are still counted in the average, which is exact. Pitfall: for MaxPool the "
        "fusion is not exact, because a pool's own padding is ignored (it acts as minus infinity) while "
        "the explicit Pad inserted zeros, so wherever every value in a border window is negative the "
        "result changes (the original gave 0). It is safe after a ReLU, the usual case in CNNs."
    ),
    "fuse_transpose_into_gemm": (
        "Removes a Transpose with perm [1, 0] that feeds a Gemm's A or B input by flipping that Gemm's "
        "transA or transB flag instead. Exports of `x @ W.t()` and of dense layers whose weight is "
        "stored the other way round leave such Transposes. The Gemm stops reading the Transpose in any "
        "case, but the Transpose itself is deleted only if nothing else reads it."
    ),
    "replace_einsum_with_matmul": (
        "Rewrites a two-input Einsum that is really a (batched) matrix product into MatMul: "
        "'bij,bjk->bik' becomes MatMul(a, b) and 'bij,bkj->bik' becomes MatMul(a, Transpose(b)). All "
        "three terms must have the same rank and use lower-case letters with the same leading batch "
        "letters, and the element type must be one MatMul supports (float, double, float16, "
        "int32/int64, uint32/uint64); any other equation stays an Einsum. Transformer code written "
        "with torch.einsum exports such nodes, and most runtimes and compilers have much better MatMul "
        "kernels than Einsum ones. Not in the preset."
    ),
    "lift_lexical_references": (
        "For each If and Loop node, records in a non-standard `__control_inputs` attribute the "
        "outer-scope values that its subgraphs read directly, and raises 'Unresolved value "
        "references' if a subgraph names a value defined nowhere. It does not change what is "
        "computed: it was written for Caffe2-era backends that needed the values a subgraph captures "
        "listed explicitly. Today it is mostly a check that every lexical reference resolves; the ONNX "
        "checker and ONNX Runtime accepted the extra attribute in our tests, but stricter tools may "
        "not. Not in the preset."
    ),
    "split_init": (
        "Splits the model Caffe2-style and keeps the init part: the nodes that depend only on "
        "initializers (never on a real input, and not on random ops or If/Loop/Scan, which count as "
        "impure), with the values the rest of the model needs from them as its new outputs. Together "
        "with split_predict it reproduces Caffe2's init_net/predict_net pair. It is not an "
        "optimisation: the result no longer computes the model's outputs, it only precomputes "
        "weight-derived values once, which constant folding nowadays does in place."
    ),
    "split_predict": (
        "Keeps the predict part of the Caffe2-style split: every node that depends on a real input (or "
        "is random or control flow), with the values the init part would produce turned into new graph "
        "inputs, and all initializers removed. The resulting model cannot run on its own; it has to be "
        "fed the outputs of split_init. It is not an optimisation but a way to ship weights and "
        "computation separately."
    ),
    "fuse_concat_into_reshape": (
        "When a Reshape's target shape comes from a Concat on axis 0 (optionally through a Cast to "
        "int64) whose pieces are constants plus at most one single-element value computed at run time, "
        "the Concat is replaced by a constant shape with -1 in place of the unknown piece. This is the "
        "`x.view(x.size(0), -1)` pattern of PyTorch exports: the batch size read through Shape/Gather "
        "becomes -1 and the whole shape computation goes dead. It bails out when more than one piece "
        "is unknown (a -1 among the constants counts) or a piece is not a 1-element vector, and the "
        "unused shape nodes remain until eliminate_deadend runs."
    ),
    "eliminate_nop_reshape": (
        "Removes a Reshape whose constant int64 target shape equals the input's known shape (a 0 means "
        "'copy this dimension' unless allowzero=1, and at most one -1 or unknown dimension is "
        "allowed). Generic code that reshapes to the shape a tensor already has, such as `x.view(B, C, "
        "H, W)`, exports these. It needs the input's shape from shape inference."
    ),
    "eliminate_nop_with_unit": (
        "Removes arithmetic with an identity element: x*1, 1*x, x+0, 0+x, x-0, x/1 and x^1, And with "
        "all-true and Or with all-false, when the constant holds the neutral value everywhere; empty "
        "(zero-element) constant inputs of a Concat are dropped as well. The constant must not enlarge "
        "x by broadcasting (ones of shape [4,2,3] times a [2,3] input are kept, because they change "
        "the shape), and 0 - x is rightly kept. Such ops come from exported scale or bias parameters "
        "that happen to be 1 or 0, normalisation with mean 0 and std 1, or all-true masks."
    ),
    "eliminate_common_subexpression": (
        "Finds nodes with the same op type, the same inputs and the same attributes and makes every "
        "consumer use the first of them; nodes carrying subgraphs or tensor attributes are skipped. "
        "Duplicates come from exporters that trace the same expression several times, such as repeated "
        "`x.size(0)` Shape/Gather chains or a mask recomputed in every layer. The duplicates stay as "
        "unconnected nodes until eliminate_deadend removes them. Pitfall: the pass does not know that "
        "random ops are non-deterministic, so two RandomUniformLike(x) nodes without a seed are merged "
        "and r1 - r2 becomes r1 - r1 = 0; the preset and onnxsim both do this."
    ),
    "fuse_qkv": (
        "When exactly three MatMuls read the same tensor as their first input, each with a constant "
        "weight of the same shape and each output used once, they become one MatMul against the three "
        "weights concatenated on the last axis, followed by a Split back into three: the fused Q/K/V "
        "projection of attention, one large GEMM instead of three small ones. It matches any three such "
        "MatMuls, not only attention, and the shared input must have exactly those three consumers (a "
        "residual connection that also reads it prevents the match). The weight Concat is a real node "
        "until constant folding, and the three old MatMuls remain until eliminate_deadend runs. It is "
        "part of the preset."
    ),
    "fuse_consecutive_unsqueezes": (
        "Merges Unsqueeze(Unsqueeze(x, a1), a2) into one Unsqueeze whose axes are combined and expressed "
        "in the final tensor's numbering. It needs x's shape (for its rank) and constant axes on both "
        "nodes (an attribute before opset 13, an input from 13). Chains of `.unsqueeze()` calls, e.g. "
        "turning a [C] vector into [1, C, 1, 1] for broadcasting, produce them; the first Unsqueeze "
        "remains until eliminate_deadend runs."
    ),
    "eliminate_deadend": (
        "Deletes every node none of whose outputs is read by another node or is a graph output, walking "
        "the graph backwards so that a whole dead chain goes in one sweep. Most other passes rewire "
        "consumers and leave the old nodes behind unconnected, so this is the clean-up that makes their "
        "effect visible. Initializers that become unused stay; eliminate_unused_initializer removes "
        "them."
    ),
    "eliminate_identity": (
        "Removes Identity nodes by connecting their input straight to their consumers. Exporters emit "
        "Identity for renamed outputs, parameters used under a second name and no-op modules "
        "(nn.Identity). An Identity that links a graph input directly to a graph output is kept, "
        "because removing it would change an interface name."
    ),
    "eliminate_shape_op": (
        "Replaces a Shape node by a constant int64 vector when every dimension it reports (between its "
        "start and end) is a known number. Once shapes are static, from the export or from onnxsim's "
        "overwrite_input_shapes, this is what starts the collapse of Shape -> Gather -> Concat -> "
        "Reshape chains into constants. It needs shape information on the Shape's input: graph inputs "
        "carry it, intermediate values only after shape inference. Any symbolic dimension, such as a "
        "dynamic batch, keeps the node."
    ),
    "fuse_consecutive_slices": (
        "Merges Slice(Slice(x)) into one Slice when both use the full opset-10+ form (starts, ends, "
        "axes and steps all given as inputs) with constant axes, and the two slice different axes. The "
        "merged Slice's parameters are built by four new Concat nodes over the originals' parameters, "
        "so they become plain constants only after constant folding, and the first Slice remains until "
        "eliminate_deadend runs. Chained slices come from indexing such as `x[:, 1:3][..., :5]`."
    ),
    "eliminate_unused_initializer": (
        "Removes the initializers that no node reads (nodes inside If/Loop/Scan subgraphs included) and "
        "that are not graph outputs, together with their entries in the graph's input list. Other "
        "passes, fusions in particular, leave old weights behind (the BN parameters after "
        "fuse_bn_into_conv, a Pad's pads vector after fuse_pad_into_conv), so this shrinks the file. "
        "An initializer that is also listed as a graph input (an overridable default) is removed too "
        "when nothing reads it, which removes that input from the interface."
    ),
    "eliminate_duplicate_initializer": (
        "Merges initializers with identical type, shape and contents into one, redirecting every user "
        "to the one kept. Exporters duplicate constants when the same value is created in several "
        "places: shared scale factors, repeated shape vectors, tied weights saved twice. Initializers "
        "that are also graph inputs or graph outputs are skipped, so in old models that list every "
        "weight among the inputs (common before IR version 4) nothing is merged."
    ),
    "adjust_slice_and_matmul": (
        "Rewrites MatMul(Slice(C1), C2) into Slice(MatMul(C1, C2)) when C1 and C2 are both constants "
        "and the Slice has explicit constant axes that do not include C1's last axis (the one the "
        "MatMul contracts); starts and ends may be computed at run time. The point is to make the "
        "MatMul foldable, as for a position-embedding table sliced to the current sequence length and "
        "then projected: after constant folding, a precomputed table is sliced at run time instead of "
        "multiplied. On its own it does more work (the full product instead of the slice's) and leaves "
        "the old Slice unconnected, so follow it with constant folding and eliminate_deadend. Not in "
        "the preset."
    ),
    "rewrite_input_dtype": (
        "Changes every int64 graph input (other than initializers) to int32 and inserts a Cast back to "
        "int64 in front of its users. It is meant for runtimes and accelerators without 64-bit integer "
        "inputs; token ids and attention masks in transformer exports are int64. This changes the "
        "model's interface, since callers must now feed int32, and values beyond 2^31 - 1 can no "
        "longer be passed. Not in the preset."
    ),
    "rewrite_where": (
        "Rewrites Where(Not(c), x, y) as Where(c, y, x), removing the Not, when the Not's output has no "
        "other consumer. Exported masking code often negates a mask right before a Where, as in "
        "`torch.where(~mask, x, y)`. The rewrite is exact; it is part of the preset, and ONNX "
        "Runtime's basic level does the same (NotWhereFusion)."
    ),
    "fuse_and_eliminate": (
        "onnxoptimizer's default pipeline (what onnxoptimizer.optimize runs when no passes are named): "
        "the 39 passes registered as fuse or no-op type, run here to a fixed point, i.e. repeated "
        "until a round changes nothing. It covers the eliminations (Identity, no-op Cast/Reshape/Pad/"
        "Transpose/..., dead ends, unused and duplicate initializers, common subexpressions), the "
        "fusions (BN, Add and Pad into Conv, MatMul+Add and Transpose into Gemm, consecutive "
        "Transposes/Squeezes/Unsqueezes/Slices/Concats, fuse_qkv) and two rewrites "
        "(extract_constant_to_initializer, rewrite_where), and leaves out adjust_add, "
        "adjust_slice_and_matmul, replace_einsum_with_matmul, rewrite_input_dtype, the renaming, "
        "lift_lexical_references and split passes. onnxoptimizer does no constant folding and no shape "
        "inference of its own, so inserted constant chains (from fuse_bn_into_conv, for one) remain "
        "and shape-based eliminations only fire where value_info already holds shapes. Pitfalls found "
        "in the sources: unseeded random ops get merged by CSE, MaxPool padding fusion is inexact for "
        "negative inputs, and a Softmax without an explicit axis followed by Log makes the preset fail."
    ),
}
"""One paragraph per onnxoptimizer pass, plus ``fuse_and_eliminate`` for the preset."""

ONNXOPTIMIZER_KIND: dict[str, str] = {
    "adjust_add": "rewrite",
    "rename_input_output": "rename",
    "set_unique_name_for_nodes": "rename",
    "nop": "utility",
    "eliminate_nop_cast": "eliminate",
    "eliminate_nop_dropout": "eliminate",
    "eliminate_nop_flatten": "eliminate",
    "extract_constant_to_initializer": "rewrite",
    "eliminate_consecutive_idempotent_ops": "eliminate",
    "eliminate_if_with_const_cond": "eliminate",
    "eliminate_nop_monotone_argmax": "eliminate",
    "eliminate_nop_pad": "eliminate",
    "eliminate_nop_concat": "eliminate",
    "eliminate_nop_split": "eliminate",
    "eliminate_nop_expand": "eliminate",
    "eliminate_shape_gather": "eliminate",
    "eliminate_slice_after_shape": "eliminate",
    "eliminate_nop_transpose": "eliminate",
    "fuse_add_bias_into_conv": "fuse",
    "fuse_bn_into_conv": "fuse",
    "fuse_consecutive_concats": "fuse",
    "fuse_consecutive_log_softmax": "fuse",
    "fuse_consecutive_reduce_unsqueeze": "fuse",
    "fuse_consecutive_squeezes": "fuse",
    "fuse_consecutive_transposes": "fuse",
    "fuse_matmul_add_bias_into_gemm": "fuse",
    "fuse_pad_into_conv": "fuse",
    "fuse_pad_into_pool": "fuse",
    "fuse_transpose_into_gemm": "fuse",
    "replace_einsum_with_matmul": "rewrite",
    "lift_lexical_references": "utility",
    "split_init": "split",
    "split_predict": "split",
    "fuse_concat_into_reshape": "fuse",
    "eliminate_nop_reshape": "eliminate",
    "eliminate_nop_with_unit": "eliminate",
    "eliminate_common_subexpression": "eliminate",
    "fuse_qkv": "fuse",
    "fuse_consecutive_unsqueezes": "fuse",
    "eliminate_deadend": "eliminate",
    "eliminate_identity": "eliminate",
    "eliminate_shape_op": "eliminate",
    "fuse_consecutive_slices": "fuse",
    "eliminate_unused_initializer": "eliminate",
    "eliminate_duplicate_initializer": "eliminate",
    "adjust_slice_and_matmul": "rewrite",
    "rewrite_input_dtype": "rewrite",
    "rewrite_where": "rewrite",
    "fuse_and_eliminate": "fuse",
}
"""What each onnxoptimizer pass does to the graph, one of :data:`KINDS`."""

ONNXSIM: dict[str, str] = {
    "onnxsim": (
        "onnx-simplifier (onnxsim 0.8.1 here) repeats three steps until the graph stops changing: ONNX "
        "shape inference; onnxoptimizer's fuse-and-eliminate passes (without eliminate_shape_gather "
        "and extract_constant_to_initializer); and constant folding, which runs every node whose "
        "inputs are all constants through ONNX Runtime once and stores the result, so that "
        "fuse_bn_into_conv's inserted chain, for one, becomes two plain initializers. This build adds "
        "fusions of its own: decomposed LayerNorm and GELU become the standard ops where the opset has "
        "them, 3-D MatMul+Add becomes Reshape -> Gemm -> Reshape, and a hand-written self-attention "
        "block becomes ONNX Runtime's com.microsoft Attention (GroupQueryAttention for grouped-query "
        "attention), which only ONNX Runtime runs; TVM Relax's importer rejected it in our test, and "
        "skipped_optimizers=['fuse_attention', 'fuse_gqa'] avoids it. Fixing the input shapes "
        "(overwrite_input_shapes) folds dynamic-shape plumbing, Shape -> Gather -> arithmetic -> Concat "
        "-> Reshape, into constants; this matters for TVM, because Relax's ONNX importer fails on a "
        "Reshape whose shape is computed at run time through tensor arithmetic ('Reshape requires the "
        "input new shape to be Shape'), and onnxsim with fixed shapes fixes that. The price is a model "
        "valid only for those shapes, and folding Expand/Tile/ConstantOfShape of constants can make "
        "the file bigger (tensors above tensor_size_threshold are not folded)."
    ),
    "onnxsim:constant_folding": (
        "onnxsim with perform_optimization=False: only shape inference and constant folding (with "
        "partial shape evaluation), no onnxoptimizer pass, and the model's dynamic dimensions kept. "
        "Every node whose inputs are all constants (initializers or Constant nodes) is run once with "
        "ONNX Runtime and replaced by its result, so weight preprocessing (transposes, casts, reshapes "
        "of weights) and shape arithmetic on static dimensions vanish, while chains that read a "
        "dynamic dimension such as a symbolic batch stay. As no optimizer pass runs, nothing is fused "
        "and nothing is cleaned up: a Shape node whose users were all folded can remain unconnected. "
        "Compare it with the full onnxsim to see how much of the simplification is folding alone."
    ),
    "onnxsim:shape_ops": (
        "onnxsim's constant folding with every input dimension fixed (the shapes you give, otherwise 1 "
        "for each symbolic dimension) and no optimizer passes, i.e. overwrite_input_shapes together "
        "with perform_optimization=False. With all shapes known, every Shape node becomes a constant "
        "and the Gather/Slice/Unsqueeze/Cast/arithmetic/Concat chain that turns it into a Reshape or "
        "Expand target folds away, so you watch PyTorch's dynamic-shape plumbing vanish and the Reshape "
        "receive a literal shape. This is the fix for importers that need static shapes, such as TVM "
        "Relax, which fails on a Reshape whose shape is computed through tensor arithmetic at run "
        "time. The inputs now carry the fixed shapes, and the model is valid only for them (batch 1 "
        "unless you say otherwise)."
    ),
}
"""One paragraph per onnxsim mode in the registry."""

ORT: dict[str, str] = {
    "ort:basic": (
        "ONNX Runtime's basic level (ORT_ENABLE_BASIC): semantics-preserving rewrites that produce only "
        "standard ONNX ops and run before the graph is split between execution providers. In its "
        "source this is constant folding, common-subexpression elimination and constant sharing; "
        "removal of Identity, Dropout and no-op Slice/Expand/Cast nodes, and Unsqueeze of an "
        "initializer folded into it; fusion of Conv+BatchNormalization, Conv+Add, Conv+Mul, Pad into "
        "Conv, MatMul+BatchNormalization, Div+Mul, Relu+Clip, Not+Where, Gemm+Transpose and Gemm+Sum; "
        "MatMul+Add into Gemm (3-D inputs get a Reshape before and after); Reshape fusion; and the "
        "transpose optimizer, which pushes Transposes through other ops until they cancel. Decomposed "
        "LayerNorm and GELU are fused here too, but only into the standard LayerNormalization (opset "
        "17+) and Gelu (opset 20+) ops when the model's opset has them. The result is saved through "
        "SessionOptions.optimized_model_filepath and stays standard ONNX, although ONNX Runtime adds "
        "its own domains (com.microsoft, ...) to opset_import."
    ),
    "ort:extended": (
        "ORT_ENABLE_EXTENDED adds fusions into ONNX Runtime's contrib operators of the com.microsoft "
        "domain, applied only to nodes placed on execution providers that implement them (here the "
        "CPU): Conv+activation -> FusedConv, Gemm+activation, MatMul+Transpose and MatMul+scale -> "
        "FusedMatMul, GELU patterns -> Gelu/FastGelu/QuickGelu/BiasGelu, LayerNorm and RMSNorm "
        "(SimplifiedLayerNormalization), SkipLayerNormalization, EmbedLayerNormalization, multi-head "
        "Attention, BiasSoftmax, and quantisation fusions (QDQ groups into QLinear* ops, MatMulNBits, "
        "DynamicQuantizeMatMul). Those ops exist only in ONNX Runtime, so the optimised model is no "
        "longer portable: the ONNX checker, TVM's importer, TensorRT and other runtimes do not know "
        "them. A further trap: at opsets below 17 the LayerNorm fusion writes LayerNormalization into "
        "the default ONNX domain, which the checker refuses ('No Op registered for LayerNormalization "
        "with domain_version of 13'). Save such a model only for the same ONNX Runtime build and "
        "execution provider."
    ),
    "ort:layout": (
        "ORT_ENABLE_LAYOUT (level 3, a recent addition to the API) adds the layout transformations on "
        "top of the extended level: on x86-64 CPUs with AVX2 or AVX-512 the NCHWc transformer rewrites "
        "convolutions, pooling and their element-wise neighbours into com.microsoft.nchwc ops that "
        "work on channel-blocked tensors (blocks of 8 or 16 channels), with ReorderInput/ReorderOutput "
        "nodes at the edges, and Conv+Add+activation is fused; an NHWC transformer also runs where the "
        "CPU kernels support it (mainly quantised convolution). The graph depends on the CPU it was "
        "made on; ONNX Runtime itself warns when saving it that it 'may contain hardware specific "
        "optimizations, and should only be used in the same environment'. In ONNX Runtime 1.32 "
        "ORT_ENABLE_ALL maps to the same top level, so ort:layout and ort:all give the same graph."
    ),
    "ort:all": (
        "ORT_ENABLE_ALL (99) turns on every level: basic, extended and layout. In ONNX Runtime 1.32 it "
        "maps to the same highest transformer level as ORT_ENABLE_LAYOUT (the graphs we saw were "
        "identical), so everything said for ort:layout applies: com.microsoft and com.microsoft.nchwc "
        "contrib ops, NCHWc reorders on x86, and a model tied to the runtime, execution provider and "
        "CPU it was optimised on. It is ONNX Runtime's default for a new InferenceSession, hence what "
        "actually runs when you benchmark with ONNX Runtime; saving it with optimized_model_filepath is "
        "useful for looking at the result, or for skipping optimisation at start-up on the same "
        "machine."
    ),
}
"""One paragraph per ONNX Runtime optimisation level (``ort:layout`` where ONNX Runtime has it)."""

VERSION_CONVERTER: dict[str, str] = {
    "version_converter": (
        "onnx.version_converter.convert_version rewrites a model to another opset of the default ONNX "
        "domain by applying per-operator adapters one version step at a time (13 -> 12 -> 11 ...), "
        "for example moving Unsqueeze's axes from an input (opset 13) back into an attribute (opset "
        "11). Opsets matter because every exporter writes one opset (PyTorch's default moves up with "
        "its releases) while every runtime or compiler supports a range, and operators change between "
        "opsets: Squeeze/Unsqueeze/Reduce* axes and Split sizes became inputs, Resize changed, and new "
        "ops such as LayerNormalization (17) and Gelu (20) appeared. Converting down fails when an op "
        "did not exist yet ('No Previous Version of LayerNormalization exists') or when no adapter "
        "covers a change ('No Adapter From Version $13 for Resize' going to 11, likewise Split from "
        "18), and targets newer than the installed onnx knows are refused. Custom domains such as "
        "com.microsoft are not touched: their nodes and opset imports pass through unchanged."
    ),
}
"""The paragraph for onnx's opset version converter."""

EXPLORER: dict[str, str] = {
    "explorer:decompose_contrib": (
        "Writes ONNX Runtime's com.microsoft contrib ops in the standard ONNX they stand for, from the "
        "definitions in ONNX Runtime's ContribOperators.md: FusedMatMul as Transpose + MatMul (+ Mul by "
        "alpha), FusedConv as Conv (+ Add of its fourth input) + its activation, Gelu and BiasGelu as the "
        "Erf formula, FastGelu as the tanh approximation, QuickGelu as x * Sigmoid(alpha x), BiasAdd as two "
        "Adds and SkipLayerNormalization as Add + LayerNormalization (opset 17). The ops of decoder LLMs "
        "built by onnxruntime-genai too: MatMulNBits as a blocked DequantizeLinear (opset 21) of the "
        "weight unpacked to uint4 [K, N] + MatMul, GatherBlockQuantized as DequantizeLinear + Gather "
        "(parameter quantized=primitive: the weight one value a byte, Cast/Sub/Mul by the block's zero "
        "point and scale/Reshape, the form TVM and IREE import and their fix writes), "
        "SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization as Pow/ReduceMean/Add/Sqrt/"
        "Div/Mul (parameter rms_norm: RMSNormalization where the opset is 23), RotaryEmbedding as Gather "
        "of the cos/sin caches + Mul/Sub/Add/Concat, and GroupQueryAttention as Concat with the past, "
        "heads repeated by Gather, a causal mask shifted by the past length and Softmax(Q K^T) V (exact "
        "when no row is padded: always at batch 1). ONNX Runtime's extended "
        "level and its transformer optimizer write these ops, and only ONNX Runtime runs them: TVM's Relax "
        "importer has no FusedMatMul, NPU compilers take standard ONNX. The result computes the same "
        "outputs (the tests compare both on ONNX Runtime). Nodes with no exact standard form are kept and "
        "the log says why: FusedMatMul's transBatchA/B, a transpose whose operand rank is unknown, "
        "GroupQueryAttention's local window, MatMulNBits' act-order g_idx, Attention and the other ops with "
        "no entry here. Parameter ops limits it to some op types."
    ),
    "explorer:unroll_loops": (
        "Unrolls every top-level Loop that runs a constant number of times: the body is copied once per "
        "iteration (named LOOP/iterN/..., so the graph view groups each iteration), each copy reads the "
        "loop-carried values the previous one produced and its iteration number as a constant, and the "
        "scan outputs are stacked with Unsqueeze + Concat. This is what tracing a Python loop gives, and "
        "what compilers without control flow need: TVM 0.27's Relax importer has no Loop, and NPU "
        "compilers want a static graph. A loop is unrolled only when that is exact (its trip count is a "
        "constant, its condition a constant true that the body passes through, and its body has no "
        "subgraphs of its own) and it runs at most max_trips times (64); every other loop is kept, and "
        "the log says why. Loops whose trip count comes from a shape become constant after onnxsim with "
        "fixed input shapes."
    ),
}
"""One paragraph per rewrite of the explorer's own (standard ONNX in, standard ONNX out)."""

ORT_QUANT: dict[str, str] = {
    "ort-quant:fix_shapes": (
        "Fixes the dimensions of the graph inputs given (input_shapes) with ONNX Runtime's own helper "
        "(make_input_shape_fixed, what its make_dynamic_shape_fixed tool runs), then the graph outputs' "
        "(fix_output_shapes). Mobile NPUs compile a static graph: ONNX Runtime's QNN and NNAPI providers "
        "take no node with a tensor whose size is not a number, so a dynamic batch or image size keeps the "
        "whole model on the CPU. After this step shape inference can give every tensor a fixed shape, and "
        "onnxsim can fold the shape computations into constants."
    ),
    "ort-quant:qnn_preprocess": (
        "ONNX Runtime's preprocessing for its QNN provider (qnn_preprocess_model): the basic graph "
        "optimisations (constant folding, redundant nodes removed), then fusions into ops the HTP runs as "
        "one (the Erf formula of GELU into Gelu, ReduceL2 + Div into LpNormalization, the "
        "Reshape/Transpose/Reshape of a space-to-depth into SpaceToDepth; with fuse_layernorm, the "
        "ReduceMean sequence into LayerNormalization). Run it before quantising: a fused op gets one "
        "pair of quantisation parameters instead of one per piece."
    ),
    "ort-quant:qnn_qdq": (
        "Quantises the model to QDQ form with the QNN provider's configuration (get_qnn_qdq_config, then "
        "quantize): every float tensor between ops gets a QuantizeLinear / DequantizeLinear pair with a "
        "scale and zero point calibrated (MinMax) on sample inputs, weights are stored as 8-bit integers. "
        "The HTP runs the ops in between in integer arithmetic (uint8 activations by default, uint16 for "
        "more precision at twice the bytes). The graph still runs on any ONNX Runtime, which is how the "
        "accuracy cost is measured here: the QDQ model's outputs against the float model's, on the CPU. "
        "Calibrate on real inputs (calibration) when there are some; without them, generated inputs give "
        "ranges that real data will not have."
    ),
}
"""One paragraph per ``ort-quant`` pass: ONNX Runtime's tools that make a model NPU-ready."""

FAMILIES: dict[str, str] = {
    "onnxoptimizer": (
        "onnxoptimizer (the onnx/optimizer project, 0.4.2 here) is ONNX's library of local graph "
        "rewrites: each pass is a C++ pattern match on onnx's in-memory IR that eliminates a useless "
        "node, fuses a pair of nodes or rewrites a pattern, and the fuse_and_eliminate preset runs the "
        "safe ones to a fixed point. It does no constant folding and no shape inference of its own: "
        "passes that need shapes or types only fire where value_info already has them (run ONNX shape "
        "inference first), and constants a fusion computes are left as small node chains for a "
        "folder to evaluate. Most passes rewire consumers and leave the old nodes unconnected, so "
        "follow them with eliminate_deadend and eliminate_unused_initializer to see the effect."
    ),
    "onnxsim": (
        "onnx-simplifier (onnxsim) wraps shape inference, onnxoptimizer's passes and constant folding "
        "executed by ONNX Runtime in one loop that runs until the graph stops changing. Its output "
        "normally uses only standard ONNX ops, which makes it the usual first step before handing an "
        "exported model to another compiler such as TVM; the exception in the 0.8.1 build installed "
        "here is its attention fusion, which emits ONNX Runtime's com.microsoft Attention. Giving it "
        "fixed input shapes lets it fold the dynamic-shape computations exporters leave behind, at the "
        "cost of a model valid only for those shapes."
    ),
    "ort": (
        "ONNX Runtime optimises every model when an InferenceSession is created, in levels: basic "
        "(standard-ONNX rewrites and constant folding), extended (fusions into com.microsoft contrib "
        "ops such as FusedConv, FusedMatMul, Gelu, SkipLayerNormalization and Attention) and layout "
        "(NCHWc blocking for x86 CPUs). Setting SessionOptions.optimized_model_filepath saves the "
        "optimised graph, which is how the explorer shows it. Beyond the basic level the saved model "
        "runs only on ONNX Runtime, and only with the execution provider and hardware it was optimised "
        "for."
    ),
    "onnxscript": (
        "onnxscript's optimizer and pattern rewriter (0.7.2 here), what torch.onnx.export(..., dynamo=True) "
        "runs on its output and what Microsoft's tooling uses to fuse transformers for ONNX Runtime. It "
        "works on onnx_ir, an in-memory IR of the model. onnxscript:optimize inlines functions, folds "
        "constants, applies general rewrite rules and removes dead code, all in standard ONNX; the "
        "onnxscript:fuse_... passes are the rule sets of onnxscript.rewriter.ort_fusions one at a time "
        "(SDPA, MHA, Attention, GELU, bias-GELU, skip and RMS normalization, rotary embedding, ...), which "
        "write com.microsoft contrib ops, and onnxscript:ort_fusions runs them all in order. Each rule is a "
        "pattern plus a check: when a rule set matches nothing, the step's log reports the rewriter's "
        "MatchingTracer for each rule, how many pattern nodes its closest attempt matched and why it failed."
    ),
    "ort-transformers": (
        "ONNX Runtime's transformer optimizer (onnxruntime.transformers.optimizer.optimize_model), Python "
        "fusions written per model family (bert, gpt2, vit, t5, unet, ...) that turn attention, "
        "LayerNorm, GELU and embedding subgraphs into com.microsoft contrib ops such as Attention, "
        "SkipLayerNormalization, EmbedLayerNormalization, BiasGelu and FastGelu, after ONNX Runtime's own "
        "basic level. Pick the type that matches how the model was built and give num_heads and "
        "hidden_size; the output runs only on ONNX Runtime."
    ),
    "explorer": (
        "Rewrites of the explorer's own that make a model take-able by compilers and runtimes other than "
        "ONNX Runtime: contrib ops written in standard ONNX, loops with a constant trip count unrolled. "
        "They are what the Relax import's one-call fix runs when the importer lacks an operator they "
        "remove. Each keeps what it cannot rewrite exactly and logs why."
    ),
    "ort-quant": (
        "ONNX Runtime's quantisation and mobile tools (onnxruntime.quantization, onnxruntime.tools): what "
        "makes a float model with dynamic shapes ready for an NPU such as Qualcomm's HTP. Static shapes "
        "first, then the provider's preprocessing, then QDQ quantisation calibrated on sample inputs. The "
        "targets view shows the HTP coverage and partitions after each step, and the output difference "
        "from the float model is the accuracy it cost."
    ),
    "onnx": (
        "Tools from the onnx package itself. Its version converter moves a model between opsets of the "
        "default ONNX domain with per-operator adapters, which is needed when an exporter's opset and "
        "a runtime's or compiler's supported opsets disagree; it changes how ops are spelled, not what "
        "they compute, and it fails for ops that have no adapter or did not exist in the target opset."
    ),
}
"""One paragraph per pass family (``onnx`` is the version converter)."""

ONNXSCRIPT: dict[str, str] = {
    "onnxscript:optimize": (
        "onnxscript.optimizer.optimize (onnxscript 0.7.2 here), the clean-up that torch.onnx.export(..., "
        "dynamo=True) runs on what it exports: first every call of a model-local function is inlined, then "
        "two rounds of constant folding (with ONNX shape inference node by node), the rewriter's default "
        "rules (onnxscript:rewrite) and removal of unused nodes, functions and opsets; finally all Constant "
        "nodes are lifted into initializers, identical initializers are merged, common subexpressions are "
        "eliminated and value names are fixed up. It works on onnx_ir, onnxscript's in-memory IR, not on the "
        "protobuf. On the zoo transformer it lifts the 51 Constant nodes and merges the duplicated Shape "
        "nodes of each reshape (Shape -8); on the resnet it folds every BatchNormalization into its Conv. "
        "Dynamic dimensions (a symbolic batch or sequence) stay dynamic, so Shape -> Gather chains that read "
        "them are kept. The output is standard ONNX; it is also the preparation the ORT fusions rely on."
    ),
    "onnxscript:constant_folding": (
        "onnxscript.optimizer.fold_constants with ONNX shape inference: every node whose inputs are all "
        "constants (initializers or Constant nodes) and whose inputs are below the size limit (8192 "
        "elements) is evaluated with onnx's reference implementation and replaced by a Constant; "
        "Shape, Size and similar ops are folded from statically known shapes even when their input is not "
        "constant, and symbolic dimensions are tracked so that shape arithmetic on them can simplify. A "
        "model whose constants are already folded and whose shapes are dynamic (the zoo transformer) has "
        "nothing to fold. Folded-away producers are left unused until onnxscript:remove_unused runs; "
        "results above the output size limit (512 x 512 elements) stay nodes so the file does not grow."
    ),
    "onnxscript:remove_unused": (
        "onnx_ir's RemoveUnusedNodesPass and RemoveUnusedFunctionsPass (onnxscript.optimizer."
        "remove_unused_nodes / remove_unused_functions): deletes every node none of whose outputs reaches a "
        "graph output, initializers nothing reads any more, and model-local functions nobody calls. It is "
        "the clean-up after folding and rewriting, which leave the old producers dangling; on a graph "
        "without dead code it changes nothing."
    ),
    "onnxscript:inline": (
        "onnxscript.optimizer.inline (onnx_ir's InlinePass): replaces every call of a model-local function "
        "by the function's body, recursively, renaming values so they stay unique, and drops the "
        "functions. PyTorch's dynamo exporter and onnxscript-authored models use model-local functions "
        "for submodules and decomposed ops; most runtimes and all of the pattern rewrites here see only "
        "the main graph, so fusions only match after inlining (optimize does it first). On the zoo's "
        "custom_domain model the zoo.local::Swish call becomes its Sigmoid and Mul."
    ),
    "onnxscript:rewrite": (
        "onnxscript.rewriter.rewrite with its default rules, the pattern-rewrite part of optimize: no-op "
        "removal (x+0, x*1, Identity-like Cast/Expand/Transpose), Cast+Cast, Reshape+Reshape, "
        "Transpose+Transpose and Unsqueeze+Unsqueeze merged, Flatten as Reshape, slices that cover a whole "
        "axis collapsed or turned into a Split, Min/Max into Clip, Relu/Clip chains merged, Reshapes "
        "around a MatMul dropped where MatMul's own broadcasting does the same, a Reshape's run-time "
        "shape replaced by a constant where its output shape is known, Pad folded into Conv, "
        "BatchNormalization folded into the Conv, ConvTranspose "
        "or Gemm before it, and all-zero optional biases removed; unused nodes go afterwards. Everything "
        "it writes is standard ONNX. On the resnet it folds the 20 BatchNormalizations into their Convs "
        "(weights recomputed, so expect float-rounding differences) and turns the Flatten into a Reshape."
    ),
    "onnxscript:ort_fusions": (
        "onnxscript.rewriter.ort_fusions.optimize_for_ort, the ONNX Runtime fusion pipeline for exported "
        "transformers: Gemm is split into MatMul+Add, then shape inference, optimize, a shape rule and "
        "optimize again, then every fusion rule set below in this order (erf GELU, RMS norm, skip layer "
        "and skip RMS norm, rotary embedding and its cos/sin cache, SDPA, GQA, MHA with and without past, "
        "MHA scale and bias, packed-QKV Attention, GELU, bias-GELU, SDPA via MHA), optimize once more, the "
        "ORT pattern rules (FusedMatMul, Softmax casts, GroupNorm) and constant lifting. The log lists how "
        "many times each fusion applied. The result uses com.microsoft contrib ops, so it runs only on "
        "ONNX Runtime. When a fusion you expected is missing, run its rule set on its own "
        "(onnxscript:fuse_...) after onnxscript:optimize: the step's log then says why it did not match."
    ),
    "onnxscript:fuse_erfgelu": (
        "Rewrites the exact GELU written out with erf, 0.5 * (x * (Erf(x / sqrt(2)) + 1)) or x * (0.5 * "
        "(Erf(x / sqrt(2)) + 1)), into com.microsoft::Gelu. The constants must be those values and the "
        "nodes in exactly that association: PyTorch's older exporter writes Mul(Mul(x, Erf(...) + 1), 0.5), "
        "which this rule set does not match (the tracer says the 0.5 is not where it expects a constant) "
        "but onnxscript:fuse_gelu does. Models at opset 20 that use the standard Gelu op have nothing to "
        "match here."
    ),
    "onnxscript:fuse_rms_normalization": (
        "Fuses RMS normalization as Llama-style models write it, x * Reciprocal(Sqrt(ReduceMean(Pow(x, 2), "
        "[-1]) + eps)) * scale, with optional Casts to a wider compute type around it, into ONNX Runtime's "
        "SimplifiedLayerNormalization (its CPU kernel is registered in the default domain, a historical "
        "mistake the source notes). epsilon must be a float constant and input and scale float types. "
        "BERT-style models use LayerNormalization, which has a mean, so nothing matches there."
    ),
    "onnxscript:fuse_skip_layer_normalization": (
        "Fuses a residual Add followed by LayerNormalization (the standard op) into "
        "com.microsoft::SkipLayerNormalization, which adds the skip input, normalizes and also returns "
        "the sum for the next residual. Variants absorb a bias Add before or after the residual Add (the "
        "Linear layer's bias, so the diff shows Add + Add + LayerNormalization). Input and skip must both "
        "be [B, S, D] with the same dims. In the zoo's pre-LN encoder that gives 2 per layer: norm2 of "
        "every layer, norm1 of every layer but the first, and the final norm. The embedding LayerNorm "
        "stays (its Add sums a position table of shape [S, D], and the log quotes that shape mismatch), "
        "and so does the first norm1, which has no Add in front of it."
    ),
    "onnxscript:fuse_skip_rms_normalization": (
        "The same fusion for RMS norm: a residual Add followed by SimplifiedLayerNormalization (made by "
        "onnxscript:fuse_rms_normalization) becomes com.microsoft::SkipSimplifiedLayerNormalization, with "
        "optional bias Adds. Llama-, Mistral- and Phi-style decoders match; it needs the RMS norm fused "
        "first, so on its own it only finds SimplifiedLayerNormalization nodes already in the model."
    ),
    "onnxscript:fuse_rotary_embedding": (
        "Finds rotary position embedding (RoPE) applied as x * cos + rotate_half(x) * sin, where "
        "rotate_half slices the last axis into two equal halves and concatenates -x2 and x1, and replaces "
        "it by a RotaryEmbedding op of onnxscript's internal domain ai.onnxruntime._fusion, kept as a "
        "model-local function of the matched nodes so the model still runs. x must be 4-D [B, H, S, Dh] "
        "with H and Dh known. onnxscript:fuse_cos_sin_cache then turns it into com.microsoft::"
        "RotaryEmbedding with a precomputed cos/sin cache. Encoders with learned position embeddings (the "
        "zoo transformer, BERT) have no RoPE."
    ),
    "onnxscript:fuse_cos_sin_cache": (
        "Completes the RoPE fusion: where the cos and sin inputs of a fused RotaryEmbedding are computed "
        "at run time from position ids and the inverse frequencies (MatMul or outer product, Cos, Sin, "
        "optional Casts), they are replaced by constant cos/sin tables gathered by position id, and the "
        "op becomes com.microsoft::RotaryEmbedding. The tables are computed at fusion time, so inv_freq "
        "(of shape [1, Dh/2, 1]) or the frequencies must be constants, and position_ids 1-D or 2-D. Needs "
        "onnxscript:fuse_rotary_embedding first."
    ),
    "onnxscript:fuse_partial_rotary_embedding": (
        "Partial RoPE, as in Phi and GPT-NeoX: only the first rotary_dim channels of each head are "
        "rotated (a Slice of the last axis, the RotaryEmbedding on that slice, a Concat with the "
        "untouched rest). The rule folds the slices into com.microsoft::RotaryEmbedding's "
        "rotary_embedding_dim attribute; it refuses an interleaved rotation or one that already has the "
        "attribute. It needs the com.microsoft::RotaryEmbedding from the two rules before it."
    ),
    "onnxscript:fuse_sdpa": (
        "Recognises scaled dot-product attention, Softmax(Q @ K^T * scale [+ mask]) @ V, in its exported "
        "spellings: K transposed directly (perm [0,1,3,2]), through 3-D, or from [B, S, H, Dh] with perm "
        "[0,2,3,1]; the scale as a Mul or Div on the scores, on Q or on K; an optional Where(IsNaN) guard "
        "after the Softmax. Q, K and V must be 4-D with known head size. The result is an SDPA op of "
        "onnxscript's internal domain ai.onnxruntime._fusion, which no runtime has: here it is kept as a "
        "model-local function so ONNX Runtime can run the step. It is the seed of the attention fusions: "
        "onnxscript:fuse_mha2 (or fuse_gqa) absorbs the Q/K/V reshapes and transposes around it into "
        "com.microsoft::MultiHeadAttention, and onnxscript:replace_sdpa_by_mha turns the SDPAs left over "
        "into MultiHeadAttention wrapped in reshapes. If the Softmax input is not a MatMul (optionally "
        "scaled by a constant, optionally plus a mask), the log says where matching stopped."
    ),
    "onnxscript:fuse_gqa": (
        "Grouped-query attention with a KV cache, as Llama-family decoders export it: rotary embedding on "
        "Q and K, past key/value concatenated, K/V heads expanded to the query heads, and an SDPA, fused "
        "into com.microsoft::GroupQueryAttention. It needs the SDPA and RotaryEmbedding fusions first and a "
        "past key/value input; encoders have no cache, so it does not match them."
    ),
    "onnxscript:fuse_qkv_gqa": (
        "When the three Q, K and V inputs of a fused GroupQueryAttention are slices of one packed "
        "projection, feeds the packed tensor to GroupQueryAttention directly and drops the slices. Needs "
        "onnxscript:fuse_gqa first."
    ),
    "onnxscript:fuse_mha1": (
        "MultiHeadAttention with past key/value: an SDPA whose Q, K and V come from [B, S, D] tensors "
        "reshaped to heads and transposed, with the past key and value concatenated in front of K and V "
        "(and optionally rotary embedding), becomes com.microsoft::MultiHeadAttention on the 3-D tensors "
        "with past and present outputs. Decoder exports with a KV cache match; encoders do not."
    ),
    "onnxscript:fuse_mha2": (
        "The MHA fusion without a cache: SDPA(Q, K, V) where each of Q, K, V is Reshape([B, S, D] -> [B, "
        "S, H, Dh]) plus Transpose, and the output is transposed and reshaped back to [B, S, D], becomes "
        "one com.microsoft::MultiHeadAttention(q, k, v) with num_heads read from the shape. Every matched "
        "node must be used only inside the pattern: the zoo transformer, like PyTorch's older TorchScript "
        "exporter, reads the shape of the attention output (Shape of the transposed context for the final "
        "reshape), so the rewriter refuses with 'Matched nodes have other uses preventing replacement' "
        "and the SDPA is left for replace_sdpa_by_mha. A dynamo export computes the reshape targets from "
        "the graph input's shape and matches, provided the shapes agree: the rule binds B, S, H and Dh "
        "across Q, K and V, and a sequence dim that shape inference knows as unk__1 on one side and seq "
        "on the other fails with 'Shape mismatch' (fixed input shapes avoid that). Needs "
        "onnxscript:fuse_sdpa first."
    ),
    "onnxscript:fuse_mha_scale": (
        "Moves a constant scale multiplied into the query in front of a MultiHeadAttention into the op's "
        "scale attribute, multiplied with the one it had (or the default 1/sqrt(head size)). The scale "
        "must be a constant scalar. Needs a MultiHeadAttention from fuse_mha1 or fuse_mha2."
    ),
    "onnxscript:fuse_mha_bias": (
        "Absorbs the bias Adds of the Q, K and V projections (MatMul + Add) in front of a "
        "MultiHeadAttention into its packed bias input (Concat of the three biases, zeros where one is "
        "missing). Biases must be 1-D constants of the projection width and the inputs float or float16. "
        "It runs only when an MHA fusion applied; BERT-style models with biased projections match."
    ),
    "onnxscript:fuse_attention": (
        "The last step of the attention chain: a MultiHeadAttention whose Q, K and V are three MatMuls of "
        "the same input (or slices of one packed MatMul), with the packed bias from fuse_mha_bias, becomes "
        "com.microsoft::Attention, which does the Q/K/V projection itself with one packed weight. It needs "
        "MultiHeadAttention with bias from the rules before it; optimize_for_ort skips it when no MHA "
        "fusion applied. Without them the log shows that no node matched its last op."
    ),
    "onnxscript:fuse_gelu": (
        "Fuses GELU written out: the tanh approximation 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * "
        "x^3))) becomes com.microsoft::FastGelu, and the exact form Mul(Mul(x, Erf(x / sqrt(2)) + 1), 0.5), "
        "PyTorch's export at opsets below 20, becomes com.microsoft::Gelu. The constants must match; "
        "opset-20 models already carry the standard Gelu op and have nothing to fuse (onnxscript:"
        "fuse_bias_gelu still absorbs their bias)."
    ),
    "onnxscript:fuse_bias_gelu": (
        "Absorbs the bias Add of the Linear layer in front of a GELU into com.microsoft::BiasGelu(x, bias): "
        "Gelu(Add(x, b)) for the standard opset-20 Gelu and for com.microsoft::Gelu, either input order. "
        "b must be 1-D, and a standard Gelu with approximate='tanh' is refused. In a transformer encoder "
        "every FFN's first Linear matches: one per layer in the zoo transformer."
    ),
    "onnxscript:replace_sdpa_by_mha": (
        "Turns every SDPA of onnxscript's internal domain that no other attention fusion consumed into "
        "com.microsoft::MultiHeadAttention: Q, K and V are transposed and reshaped to [B, S, D] in front "
        "of it and the output reshaped and transposed back, so ONNX Runtime gets its fused attention "
        "kernel even when the surrounding reshapes did not match fuse_mha2. Look for the new "
        "Transpose/Reshape pairs in the diff: they are the price of the near-miss."
    ),
    "onnxscript:ort_pattern_rewrite_rules": (
        "ORT_PATTERN_REWRITE_RULES, which optimize_for_ort applies after the transformer fusions: Softmax "
        "with Cast to float32 and back around it (float16 models) reduced to the Softmax, "
        "InstanceNormalization on reshaped tensors turned into com.microsoft::GroupNorm, and MatMul with a "
        "Transpose on an input or a constant Div or Mul on its output folded into com.microsoft::"
        "FusedMatMul (transA/transB, alpha). On the zoo transformer the attention scores' MatMul + Div "
        "becomes FusedMatMul once per layer."
    ),
}
"""One paragraph per onnxscript pass (optimizer parts, ``optimize_for_ort`` and each fusion rule set)."""

ONNXSCRIPT_KIND: dict[str, str] = {
    "onnxscript:optimize": "simplify",
    "onnxscript:constant_folding": "simplify",
    "onnxscript:remove_unused": "eliminate",
    "onnxscript:inline": "rewrite",
    "onnxscript:rewrite": "rewrite",
}
"""Kinds of the onnxscript optimizer parts (the fusions are ``"fuse"``)."""

_ORT_TRANSFORMERS_CLASSES: dict[str, str] = {
    "bert": (
        "BertOnnxModel, written for BERT, RoBERTa, DistilBERT and other encoders exported by PyTorch, and "
        "reused for vit, swin and gpt_neox"
    ),
    "bert_tf": "BertOnnxModelTF, BERT converted from TensorFlow by tf2onnx",
    "bert_keras": "BertOnnxModelKeras, BERT converted from Keras by keras2onnx",
    "gpt2": "Gpt2OnnxModel, GPT-2-style decoders (attention with past key/value, FastGelu)",
    "gpt2_tf": "Gpt2OnnxModel, for GPT-2 converted from TensorFlow",
    "bart": "BartOnnxModel, encoder-decoder models such as BART and Marian",
    "t5": "T5OnnxModel, T5 (RMS norm without mean, relative position bias)",
    "clip": "ClipOnnxModel, the CLIP text encoder of Stable Diffusion (no EmbedLayerNormalization fusion)",
    "unet": (
        "UnetOnnxModel, the Stable Diffusion UNet (cross-attention, packed QKV/KV; its NhwcConv, GroupNorm, "
        "SkipGroupNorm, BiasSplitGelu and BiasAdd fusions have only CUDA kernels and stay off unless "
        "gpu_fusions=True: on a CNN, NhwcConv turns every Conv into Transpose -> NhwcConv -> Transpose, "
        "which the CPU build cannot run)"
    ),
    "vae": "VaeOnnxModel, the Stable Diffusion VAE decoder (its CUDA-only fusions as for unet)",
    "conformer": "ConformerOnnxModel, speech Conformer encoders",
    "tnlr": "TnlrOnnxModel, Microsoft's Turing NLR encoder",
    "sam2": "Sam2OnnxModel, Segment Anything 2",
    "mmdit": "MmditOnnxModel, the multimodal diffusion transformer of Stable Diffusion 3 and Flux",
    "phi": (
        "PhiOnnxModel, for Phi-2 as the dynamo exporter wrote it with one model-local function per module; "
        "a model without functions is refused (the optimizer itself would fail with a TypeError)"
    ),
    "qwen3": "Gpt2OnnxModel, used for Qwen3 decoders (RoPE, grouped-query attention, RMS norm)",
    "vit": "BertOnnxModel, with no attention mask (vision transformers attend to every patch)",
    "swin": "BertOnnxModel, for the Swin transformer's windowed attention",
    "gpt_neox": (
        "BertOnnxModel, for GPT-NeoX (rotary attention), with ONNX Runtime's own level off by default"
    ),
}


def ort_transformers(model_type: str) -> str:
    """The explanation of ``ort-transformers:MODEL_TYPE`` (ONNX Runtime's transformer optimizer).

    Examples
    --------
    >>> "BertOnnxModel" in ort_transformers("bert")
    True
    """
    fitted = _ORT_TRANSFORMERS_CLASSES.get(
        model_type, f"the optimizer class ONNX Runtime uses for {model_type}"
    )
    return (
        f"onnxruntime.transformers.optimizer.optimize_model(model_type='{model_type}') with {fitted}. "
        "ONNX Runtime's transformer optimizer is a set of Python pattern matchers on the ONNX graph, written "
        "per model family, which fuse what its C++ graph optimiser does not: multi-head attention into "
        "com.microsoft::Attention (one packed Q/K/V weight) or MultiHeadAttention, embedding lookups plus "
        "LayerNorm into EmbedLayerNormalization, residual Add + LayerNorm into SkipLayerNormalization, "
        "Linear bias + GELU into BiasGelu (FastGelu with gelu_approximation), RMS norm into "
        "SimplifiedLayerNormalization, RoPE into RotaryEmbedding. For most types ONNX Runtime's basic level "
        "runs first (opt_level 1; 0 for bert_tf, bert_keras, gpt2_tf, gpt_neox, phi and qwen3, 2 for t5). "
        "Attention fusion needs num_heads and hidden_size: 0 asks the optimizer to read them from the Q "
        "Reshape's target (a constant, or a Concat ending in constant heads and head size, as in the zoo); "
        "when it cannot, the values given are used, so give them (gpt2 and vit warn that they need them). "
        "A pattern that differs from what the optimizer was "
        "written for (another exporter, a different op order) is silently left unfused; the log lists the "
        "optimizer's 'Fused ...' counts, and the diff shows which nodes each contrib op replaced. On the "
        "zoo transformer the bert type fuses 2 Attention, 4 SkipLayerNormalization and 2 BiasGelu "
        "(2 layers), while gpt2 fuses no attention there: its matcher follows GPT-2's export (Conv1D "
        "projections as Reshape -> Gemm -> Reshape, a causal mask in front of the Softmax). The result "
        "runs only on ONNX Runtime; ops that only have CUDA kernels (NhwcConv, GroupNorm, ...) are not fused "
        "unless gpu_fusions=True, and the log names any op left without a CPU kernel."
    )
