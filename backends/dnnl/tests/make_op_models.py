"""Tiny ONNX models, one per operator case, for test_dnnl_vs_ort (swi_dnnl vs ONNX Runtime).

    python3 make_op_models.py OUTDIR [SEED]

Writes OUTDIR/<case>.onnx and OUTDIR/cases.txt: one line per case, "--windows N <file>
<channels> <d0> [<d1> <d2>]" (test_dnnl_vs_ort's arguments: windows to run) or "<file>
refuse <word>" (the dnnl loader must refuse it with a message containing <word>). Shapes and attributes are drawn from a seeded RNG:
the same seed gives the same files.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 36)
os.makedirs(out, exist_ok=True)
lines = []


def const(name, arr):
    return helper.make_tensor(name, TensorProto.FLOAT, arr.shape, arr.astype(np.float32).ravel().tolist())


def save(case, nodes, inits, cin, win, cout_shape=None, opset=17, refuse=None, windows=2, batch="n"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, cin] + list(win))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph(nodes, case, [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, case + ".onnx"))
    f = os.path.join(out, case + ".onnx")
    lines.append(f"{f} refuse {refuse}" if refuse else
                 f"--windows {windows} {f} {cin} " + " ".join(str(w) for w in win))


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def conv_case(case, deconv=False, act=None, dims=3):
    cin = int(rng.integers(1, 6))
    g = int(rng.choice([1, 1, 2])) if cin % 2 == 0 else 1
    cout = g * int(rng.integers(1, 4))
    k = [int(rng.integers(1, 4)) for _ in range(dims)]
    s = [int(rng.integers(1, 3)) for _ in range(dims)]
    d = [1 if deconv else int(rng.integers(1, 3)) for _ in range(dims)]
    p = [int(rng.integers(0, 2)) for _ in range(2 * dims)]
    win = [int(rng.integers(5, 10)) for _ in range(dims)]
    attrs = dict(kernel_shape=k, strides=s, dilations=d, pads=p, group=g)
    if deconv:
        w = r(cin, cout // g, *k)
        op = [min(p[dims + a], s[a] - 1) for a in range(dims)]
        attrs["output_padding"] = op
    else:
        w = r(cout, cin // g, *k)
    inputs = ["x", "w", "b"]
    nodes = [helper.make_node("ConvTranspose" if deconv else "Conv", inputs, ["c" if act else "y"], **attrs)]
    if act:
        a = {"alpha": float(rng.uniform(0.01, 0.3))} if act == "LeakyRelu" else {}
        nodes.append(helper.make_node(act, ["c"], ["y"], **a))
    save(case, nodes, [const("w", w), const("b", r(cout))], cin, win)


for i in range(4):
    conv_case(f"conv3d_{i}")
    conv_case(f"deconv3d_{i}", deconv=True)
for act in ["Relu", "LeakyRelu", "Sigmoid", "Tanh"]:
    conv_case(f"conv_{act.lower()}", act=act)
conv_case("deconv_leakyrelu", deconv=True, act="LeakyRelu")
conv_case("conv2d", dims=2)


def unary_case(case, op, extra_inits=(), extra_inputs=(), **attrs):
    c = int(rng.integers(1, 5))
    win = [int(rng.integers(3, 8)) for _ in range(3)]
    # a conv first so that the op reads a blocked layout, as in a real network
    nodes = [helper.make_node("Conv", ["x", "w0"], ["h"], kernel_shape=[1, 1, 1]),
             helper.make_node(op, ["h"] + list(extra_inputs), ["y"], **attrs)]
    inits = [const("w0", r(c, c, 1, 1, 1))] + [const(n, f(c)) for n, f in extra_inits]
    save(case, nodes, inits, c, win)


unary_case("relu", "Relu")
unary_case("leakyrelu", "LeakyRelu", alpha=0.2)
unary_case("sigmoid", "Sigmoid")
unary_case("tanh", "Tanh")
unary_case("prelu_channel", "PRelu", [("s", lambda c: r(c, 1, 1, 1))], ["s"])
unary_case("prelu_scalar", "PRelu", [("s", lambda c: r(1))], ["s"])
unary_case("instnorm", "InstanceNormalization", [("sc", lambda c: r(c)), ("bi", lambda c: r(c))], ["sc", "bi"],
           epsilon=1e-5)
unary_case("batchnorm", "BatchNormalization",
           [("sc", lambda c: r(c)), ("bi", lambda c: r(c)), ("mu", lambda c: r(c)),
            ("va", lambda c: np.abs(r(c)) + 0.5)], ["sc", "bi", "mu", "va"], epsilon=1e-3)
unary_case("softmax", "Softmax", axis=1)
unary_case("maxpool", "MaxPool", kernel_shape=[2, 2, 2], strides=[2, 2, 2])
unary_case("maxpool_pad", "MaxPool", kernel_shape=[3, 3, 3], strides=[1, 2, 1], pads=[1, 1, 0, 1, 0, 1])
unary_case("avgpool", "AveragePool", kernel_shape=[3, 2, 3], strides=[1, 2, 2], pads=[1, 0, 1, 1, 1, 0])
unary_case("avgpool_incl", "AveragePool", kernel_shape=[3, 3, 3], pads=[1, 1, 1, 1, 1, 1], count_include_pad=1)
unary_case("add_const", "Add", [("k", lambda c: r(c, 1, 1, 1))], ["k"])
unary_case("mul_const", "Mul", [("k", lambda c: r(1, c, 1, 1, 1))], ["k"])


def two_branch(case, op, **attrs):
    c = int(rng.integers(1, 5))
    c2 = int(rng.integers(1, 20)) if op == "Concat" else c
    win = [int(rng.integers(3, 8)) for _ in range(3)]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], kernel_shape=[1, 1, 1]),
             helper.make_node("Conv", ["x", "w1"], ["b"], kernel_shape=[3, 3, 3], pads=[1] * 6),
             helper.make_node(op, ["a", "b"], ["y"], **attrs)]
    save(case, nodes, [const("w0", r(c, c, 1, 1, 1)), const("w1", r(c2, c, 3, 3, 3))], c, win)


two_branch("add", "Add")
two_branch("mul", "Mul")
two_branch("concat", "Concat", axis=1)
two_branch("concat_neg", "Concat", axis=-4)

# refused: an operator the backend lacks, a computed weight, an attribute it lacks
save("refuse_resize_cubic", [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="cubic")],
     [const("sc", np.array([1, 1, 2, 2, 2], np.float32))], 1, [4, 4, 4], refuse="mode cubic")
save("refuse_resize_corners", [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear",
                                                coordinate_transformation_mode="align_corners")],
     [const("sc", np.array([1, 1, 2, 2, 2], np.float32))], 1, [4, 4, 4], refuse="align_corners")
save("refuse_topk", [helper.make_node("Erf", ["x"], ["y"])], [], 1, [4, 4, 4], refuse="operator Erf")
save("refuse_conv_weights", [helper.make_node("Conv", ["x", "x"], ["y"])], [], 1, [4, 4, 4], refuse="weights")
save("refuse_ceil", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2], ceil_mode=1)], [], 1,
     [4, 4, 4], refuse="ceil_mode")
save("refuse_same", [helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER")],
     [const("w", r(1, 1, 3, 3, 3))], 1, [4, 4, 4], refuse="SAME_UPPER")

save("refuse_fp16_weights", [helper.make_node("Conv", ["x", "w"], ["y"])],
     [helper.make_tensor("w", TensorProto.FLOAT16, [1, 1, 1, 1, 1], [1.0])], 1, [4, 4, 4], refuse="float16")
save("refuse_pad", [helper.make_node("Pad", ["x", "p"], ["y"], mode="constant")],
     [helper.make_tensor("p", TensorProto.INT64, [10], [0, 0, 1, 0, 0, 0, 0, 0, 0, 0])], 1, [4, 4, 4],
     refuse="Pad")
# a zero Pad (as nnU-Net's ResEnc exports leave before AveragePool) is an Identity
save("pad_zero_avgpool", [helper.make_node("Pad", ["x", "p"], ["q"], mode="constant"),
                          helper.make_node("AveragePool", ["q"], ["y"], kernel_shape=[2, 2, 2], strides=[2, 2, 2])],
     [helper.make_tensor("p", TensorProto.INT64, [10], [0] * 10)], 1, [6, 6, 6])



def resize_case(case, scales=None, sizes=None, opset=17, op="Resize", **attrs):
    """A Conv (so that Resize reads a blocked layout) then Resize or Upsample."""
    c = int(rng.integers(1, 4))
    win = [int(rng.integers(3, 7)) for _ in range(3)]
    inits = [const("w0", r(c, c, 1, 1, 1))]
    if op == "Upsample":
        ins = ["h", "sc"]
        inits.append(const("sc", np.array([1, 1] + scales, np.float32)))
    elif sizes is not None:
        ins = ["h", "", "", "sz"]
        inits.append(helper.make_tensor("sz", TensorProto.INT64, [5], [1, c] + [s(w) for s, w in zip(sizes, win)]))
    else:
        ins = ["h", "", "sc"]
        inits.append(const("sc", np.array([1, 1] + scales, np.float32)))
    nodes = [helper.make_node("Conv", ["x", "w0"], ["h"], kernel_shape=[1, 1, 1]),
             helper.make_node(op, ins, ["y"], **attrs)]
    # sizes fix the batch at 1: so does the input then (ONNX Runtime runs 2 calls of 1)
    save(case, nodes, inits, c, win, opset=opset, batch=1 if sizes is not None else "n")


resize_case("resize_nearest", scales=[2, 2, 2])
resize_case("resize_nearest_asym", scales=[3, 1, 2], coordinate_transformation_mode="asymmetric",
            nearest_mode="floor")
resize_case("resize_nearest_sizes", sizes=[lambda w: 2 * w, lambda w: w, lambda w: 3 * w])
resize_case("resize_linear", scales=[2, 2, 2], mode="linear")
resize_case("resize_linear_sizes", sizes=[lambda w: w + 2, lambda w: 2 * w - 1, lambda w: w], mode="linear")
resize_case("resize_linear_pytorch", scales=[2, 3, 1], mode="linear",
            coordinate_transformation_mode="pytorch_half_pixel")
resize_case("upsample_nearest", scales=[2, 2, 1], op="Upsample", mode="nearest", opset=9)

with open(os.path.join(out, "cases.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
