"""MACs and FLOPs per node, from the node's concrete input/output shapes.

Conventions (docs/design.md "Terms"; every count is for the whole batch, not per item):

* **MACs** (multiply-accumulates) are counted only for the matrix ops: Conv, ConvTranspose, Gemm,
  MatMul (and their integer/QLinear forms), two-operand Einsum, and the recurrent cells LSTM/GRU/RNN.
* **FLOPs** = 2 × MACs for those ops (a multiply and an add each), **plus one FLOP per output element
  for a bias add** (Conv/ConvTranspose with a bias input, Gemm with a ``C`` input and ``beta != 0``), the
  same count the bias would get as a separate elementwise ``Add`` node. Gemm's ``alpha``/``beta`` scaling
  multiplies are not counted.
* **Elementwise** ops (Add, Mul, Relu, Sigmoid, Clip, Where, comparisons ...): 1 FLOP per output element.
* **Pooling** (MaxPool, AveragePool, LpPool): ``prod(kernel_shape)`` FLOPs per output element (one
  compare or add per window element). GlobalAveragePool/GlobalMaxPool: one FLOP per *input* element.
* **Normalizations**: BatchNormalization (inference) 2 FLOPs per element (scale and shift after folding
  mean/var); LayerNormalization, InstanceNormalization, GroupNormalization 5 per element (mean,
  subtract, variance, divide, scale+shift; the per-group statistics are amortized).
  Softmax/LogSoftmax: 3 FLOPs per element (exp, sum, divide/subtract).
* **Reductions** (ReduceSum/Mean/Max/..., ArgMax): 1 FLOP per *input* element.
* Data movement (Reshape, Transpose, Concat, Slice, Gather, Cast, Pad, Resize, Shape ...) and every op
  not in :data:`OP_COUNTERS`: 0 MACs, 0 FLOPs.

Each counter takes an :class:`OpShapes` and returns ``(macs, flops)``; it returns ``(0, 0)`` when a shape
it needs is unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

from sparsify_tui.formatting import plural

Shape = Optional[list]


@dataclass
class OpShapes:
    """What a counter sees: input/output shapes (None when unknown) and the node attributes."""

    op_type: str
    input_shapes: list
    output_shapes: list
    attrs: dict = field(default_factory=dict)

    def inp(self, i: int) -> Shape:
        """Shape of input ``i`` (None when absent or unknown)."""
        return self.input_shapes[i] if i < len(self.input_shapes) else None

    def out(self, i: int = 0) -> Shape:
        """Shape of output ``i`` (None when absent or unknown)."""
        return self.output_shapes[i] if i < len(self.output_shapes) else None

    def has_input(self, i: int) -> bool:
        """True when the node has a non-empty input ``i``."""
        return i < len(self.input_shapes) and self.input_shapes[i] != "absent"


def numel(shape: Shape) -> int:
    """Element count of a shape (1 for a scalar ``[]``); 0 when unknown."""
    if shape is None or shape == "absent":
        return 0
    return int(math.prod(int(d) for d in shape))


def conv(s: OpShapes) -> tuple[int, int]:
    """Conv: MACs = N·Cout·Hout·Wout·(Cin/group)·kH·kW (any number of spatial dims).

    The weight is ``[Cout, Cin/group, k1, k2, ...]`` so MACs = numel(output)·prod(weight[1:]); stride,
    padding and dilation are already reflected in the output shape. FLOPs = 2·MACs + numel(output) when
    there is a bias.
    """
    out, w = s.out(), s.inp(1)
    if out is None or w is None:
        return 0, 0
    macs = numel(out) * numel(w[1:])
    return macs, 2 * macs + (numel(out) if s.has_input(2) else 0)


def conv_transpose(s: OpShapes) -> tuple[int, int]:
    """ConvTranspose: MACs = N·Cin·Hin·Win·(Cout/group)·kH·kW.

    Every input element is multiplied by a ``(Cout/group)·kH·kW`` kernel slice; the weight is
    ``[Cin, Cout/group, k1, ...]`` so MACs = numel(input)·prod(weight[1:]). FLOPs = 2·MACs (+ numel(output)
    with a bias).
    """
    x, w, out = s.inp(0), s.inp(1), s.out()
    if x is None or w is None:
        return 0, 0
    macs = numel(x) * numel(w[1:])
    return macs, 2 * macs + (numel(out) if s.has_input(2) and out is not None else 0)


def gemm(s: OpShapes) -> tuple[int, int]:
    """Gemm Y = alpha·op(A)·op(B) + beta·C: MACs = M·K·N with op(A) ``[M, K]`` (A transposed when
    ``transA=1``) and output ``[M, N]``. FLOPs = 2·MACs + M·N when C is given and ``beta != 0``."""
    a, out = s.inp(0), s.out()
    if a is None or out is None or len(a) != 2:
        return 0, 0
    k = a[0] if s.attrs.get("transA", 0) else a[1]
    macs = numel(out) * int(k)
    bias = numel(out) if s.has_input(2) and s.attrs.get("beta", 1.0) != 0 else 0
    return macs, 2 * macs + bias


def matmul(s: OpShapes) -> tuple[int, int]:
    """MatMul (numpy semantics, batched and broadcast): MACs = numel(output)·K, K = A.shape[-1].

    A 1-D A is ``[K]``. The broadcast batch dims are already in the output shape. FLOPs = 2·MACs.
    """
    a, out = s.inp(0), s.out()
    if a is None or out is None or len(a) == 0:
        return 0, 0
    macs = numel(out) * int(a[-1])
    return macs, 2 * macs


def qlinear_matmul(s: OpShapes) -> tuple[int, int]:
    """QLinearMatMul (inputs a, a_scale, a_zp, b, ...): same MACs as MatMul of ``a`` and ``b``."""
    return matmul(OpShapes(s.op_type, [s.inp(0), s.inp(3)], s.output_shapes, s.attrs))


def qlinear_conv(s: OpShapes) -> tuple[int, int]:
    """QLinearConv (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B): same MACs as Conv."""
    bias = [s.inp(8)] if len(s.input_shapes) > 8 and s.has_input(8) else []
    return conv(OpShapes(s.op_type, [s.inp(0), s.inp(3)] + bias, s.output_shapes, s.attrs))


def einsum(s: OpShapes) -> tuple[int, int]:
    """Einsum with one or two operands (no ellipsis): MACs = product of the sizes of every index letter
    (each output element sums over the contracted letters). FLOPs = 2·MACs."""
    eq = str(s.attrs.get("equation", "")).replace(" ", "")
    lhs = eq.split("->")[0].split(",")
    if "..." in eq or not 1 <= len(lhs) <= 2 or len(lhs) > len(s.input_shapes):
        return 0, 0
    sizes: dict[str, int] = {}
    for term, shape in zip(lhs, s.input_shapes):
        if shape is None or shape == "absent" or len(term) != len(shape):
            return 0, 0
        for letter, dim in zip(term, shape):
            sizes[letter] = max(sizes.get(letter, 1), int(dim))
    if len(lhs) == 1:
        return 0, numel(s.inp(0))
    macs = int(math.prod(sizes.values()))
    return macs, 2 * macs


def _recurrent(gates: int) -> Callable[[OpShapes], tuple[int, int]]:
    def count(s: OpShapes) -> tuple[int, int]:
        x, w = s.inp(0), s.inp(1)
        if x is None or w is None or len(x) != 3 or len(w) != 3:
            return 0, 0
        layout = s.attrs.get("layout", 0)
        seq, batch = (x[1], x[0]) if layout else (x[0], x[1])
        dirs, hidden = w[0], w[1] // gates
        inp = x[2]
        macs = int(seq) * int(batch) * int(dirs) * gates * int(hidden) * (int(inp) + int(hidden))
        # gate nonlinearities and state updates: ~gates+2 elementwise ops per hidden unit per step
        elem = int(seq) * int(batch) * int(dirs) * int(hidden) * (gates + 2)
        return macs, 2 * macs + elem

    count.__doc__ = (
        f"Recurrent cell with {plural(gates, 'gate')}: MACs = seq·batch·directions·{gates}·H·(I+H) (input and recurrent "
        f"matmuls); FLOPs = 2·MACs + seq·batch·directions·H·{gates + 2} gate/state elementwise ops."
    )
    return count


def elementwise(s: OpShapes) -> tuple[int, int]:
    """Elementwise op: 0 MACs, 1 FLOP per output element."""
    return 0, numel(s.out())


def per_element(n: int) -> Callable[[OpShapes], tuple[int, int]]:
    """A counter of ``n`` FLOPs per output element (normalizations, softmax)."""

    def count(s: OpShapes) -> tuple[int, int]:
        return 0, n * numel(s.out())

    count.__doc__ = f"0 MACs, {n} FLOPs per output element."
    return count


def pool(s: OpShapes) -> tuple[int, int]:
    """MaxPool/AveragePool/LpPool: prod(kernel_shape) FLOPs per output element (compare or add per window)."""
    kernel = s.attrs.get("kernel_shape")
    if not kernel:
        return 0, 0
    return 0, numel(s.out()) * int(math.prod(kernel))


def global_pool(s: OpShapes) -> tuple[int, int]:
    """GlobalAveragePool/GlobalMaxPool: one FLOP per input element."""
    return 0, numel(s.inp(0))


def reduce(s: OpShapes) -> tuple[int, int]:
    """Reductions: one FLOP per input element."""
    return 0, numel(s.inp(0))


ELEMENTWISE_OPS = (
    "Add Sub Mul Div Pow Mod Neg Abs Reciprocal Sqrt Exp Log Erf Sin Cos Tan Tanh Sigmoid HardSigmoid "
    "HardSwish Relu LeakyRelu PRelu Elu Selu Celu Gelu Mish Softplus Softsign ThresholdedRelu Clip Max Min "
    "Mean Sum Where Equal Greater GreaterOrEqual Less LessOrEqual And Or Xor Not Sign Floor Ceil Round "
    "IsNaN IsInf BitShift BitwiseAnd BitwiseOr BitwiseXor BitwiseNot Shrink QuickGelu FastGelu BiasGelu"
).split()

#: op type -> counter returning ``(macs, flops)``.
OP_COUNTERS: dict[str, Callable[[OpShapes], tuple[int, int]]] = {
    "Conv": conv,
    "ConvInteger": conv,
    "QLinearConv": qlinear_conv,
    "ConvTranspose": conv_transpose,
    "Gemm": gemm,
    "MatMul": matmul,
    "MatMulInteger": matmul,
    "QLinearMatMul": qlinear_matmul,
    "Einsum": einsum,
    "LSTM": _recurrent(4),
    "GRU": _recurrent(3),
    "RNN": _recurrent(1),
    "MaxPool": pool,
    "AveragePool": pool,
    "LpPool": pool,
    "GlobalAveragePool": global_pool,
    "GlobalMaxPool": global_pool,
    "GlobalLpPool": global_pool,
    "BatchNormalization": per_element(2),
    "LayerNormalization": per_element(5),
    "SimplifiedLayerNormalization": per_element(4),
    "SkipLayerNormalization": per_element(6),
    "InstanceNormalization": per_element(5),
    "GroupNormalization": per_element(5),
    "LpNormalization": per_element(3),
    "Softmax": per_element(3),
    "LogSoftmax": per_element(3),
    "Hardmax": per_element(1),
    **{op: reduce for op in "ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum "
       "ReduceLogSumExp ReduceSumSquare ArgMax ArgMin".split()},
    **{op: elementwise for op in ELEMENTWISE_OPS},
}

#: ops whose FLOPs are 2 × MACs (+ bias adds): the matrix ops.
MATRIX_OPS = frozenset({"Conv", "ConvInteger", "QLinearConv", "ConvTranspose", "Gemm", "MatMul", "MatMulInteger",
                        "QLinearMatMul"})


def count_macs_flops(s: OpShapes) -> tuple[int, int]:
    """``(macs, flops)`` of one node from :data:`OP_COUNTERS`; ``(0, 0)`` for ops not in the table."""
    counter = OP_COUNTERS.get(s.op_type)
    if counter is None:
        return 0, 0
    macs, flops = counter(s)
    return int(macs), int(flops)
