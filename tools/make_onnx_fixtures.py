#!/usr/bin/env python3
"""Writes the ONNX fixtures the EarshotONNX tests read.

Usage (from the repository root; needs only `pip install onnx numpy`):
    tools/.venv/bin/python tools/make_onnx_fixtures.py

Writes into Tests/EarshotONNXTests/Fixtures/ three small models made with
onnx.helper, each with a JSON beside it that states what the file holds:

  initializers.onnx  every element type the reader decodes, each stored in
                     raw_data and in its typed field (float_data, int32_data,
                     int64_data, double_data, uint64_data), with scalars,
                     empty tensors and special values (-0, inf, NaN,
                     subnormals, extremes).
  attributes.onnx    a node with attributes of every kind (float, int,
                     string, tensor, graph, floats, ints, strings, tensors,
                     graphs, empty lists, a string that is not UTF-8), an
                     omitted optional input (""), an omitted optional output,
                     inputs with named and unknown dims, outputs without a
                     shape, a sequence-typed value, metadata_props and two
                     opset imports.
  subgraphs.onnx     an If whose then/else graphs have their own initializers
                     and Constant nodes, with a second If nested in the else
                     graph (three graph levels).

The JSON is written from the saved file read back with onnx (the protobuf
library and onnx.numpy_helper.to_array decode it, independently of the Swift
reader): the model's header and metadata, and for each graph its name, nodes
(name, op_type, domain, inputs, outputs, attributes with their values),
initializers (name, data_type, dims, values), inputs, outputs and value_info
(elem_type, shape: {"value": n}, {"param": "name"} or null per dim; null when
there is no shape). Floating-point values are given as the bit patterns of
their float32 value (DOUBLE rounded to nearest, FLOAT16 and BFLOAT16 widened),
so that the test compares them exactly; integers (and BOOL as 0/1) as int64.
Strings that are not UTF-8 are decoded with U+FFFD for each invalid sequence.
"""

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "Tests" / "EarshotONNXTests" / "Fixtures"

FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
INT_TYPES = {TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8,
             TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64, TensorProto.BOOL}


# --- The JSON description of a saved model ---------------------------------------------------

def float_bits(values):
    """float32 bit patterns of `values` (a float32 array or a list of Python floats)."""
    return np.asarray(values, dtype=np.float32).reshape(-1).view(np.uint32).tolist()


def tensor_json(t):
    array = numpy_helper.to_array(t)
    floats = integers = None
    if t.data_type in FLOAT_TYPES:
        with np.errstate(over="ignore"):  # DOUBLE values past float32's range become +-inf
            floats = float_bits(array.astype(np.float32))
    elif t.data_type in INT_TYPES:
        integers = [int(v) for v in array.reshape(-1).astype(np.int64)]
    else:
        raise ValueError(f"fixture tensor {t.name} has a type the reader does not decode")
    return {"name": t.name, "data_type": t.data_type, "dims": list(t.dims), "float_bits": floats,
            "integers": integers}


def text(data):
    return data.decode("utf-8", errors="replace")


def attribute_json(a):
    A = onnx.AttributeProto
    if a.type == A.FLOAT:
        return {"type": "float", "float_bits": float_bits([a.f])[0]}
    if a.type == A.INT:
        return {"type": "int", "int": a.i}
    if a.type == A.STRING:
        return {"type": "string", "string": text(a.s)}
    if a.type == A.TENSOR:
        return {"type": "tensor", "tensor": tensor_json(a.t)}
    if a.type == A.GRAPH:
        return {"type": "graph", "graph": graph_json(a.g)}
    if a.type == A.FLOATS:
        return {"type": "floats", "floats_bits": float_bits(list(a.floats))}
    if a.type == A.INTS:
        return {"type": "ints", "ints": list(a.ints)}
    if a.type == A.STRINGS:
        return {"type": "strings", "strings": [text(s) for s in a.strings]}
    if a.type == A.TENSORS:
        return {"type": "tensors", "tensors": [tensor_json(t) for t in a.tensors]}
    if a.type == A.GRAPHS:
        return {"type": "graphs", "graphs": [graph_json(g) for g in a.graphs]}
    raise ValueError(f"attribute {a.name}: type {a.type} not in the fixtures' set")


def value_info_json(v):
    elem_type = shape = None
    if v.type.WhichOneof("value") == "tensor_type":
        tt = v.type.tensor_type
        elem_type = tt.elem_type or None
        if tt.HasField("shape"):
            shape = []
            for d in tt.shape.dim:
                kind = d.WhichOneof("value")
                if kind == "dim_value":
                    shape.append({"value": d.dim_value})
                elif kind == "dim_param" and d.dim_param:
                    shape.append({"param": d.dim_param})
                else:
                    shape.append(None)
    return {"name": v.name, "elem_type": elem_type, "shape": shape}


def node_json(n):
    return {"name": n.name, "op_type": n.op_type, "domain": n.domain, "inputs": list(n.input),
            "outputs": list(n.output), "attributes": {a.name: attribute_json(a) for a in n.attribute}}


def graph_json(g):
    return {"name": g.name, "nodes": [node_json(n) for n in g.node],
            "initializers": [tensor_json(t) for t in g.initializer],
            "inputs": [value_info_json(v) for v in g.input], "outputs": [value_info_json(v) for v in g.output],
            "value_info": [value_info_json(v) for v in g.value_info]}


def model_json(m):
    return {"ir_version": m.ir_version, "producer_name": m.producer_name,
            "producer_version": m.producer_version,
            "opset_imports": [{"domain": o.domain, "version": o.version} for o in m.opset_import],
            "metadata": {p.key: p.value for p in m.metadata_props}, "graph": graph_json(m.graph)}


def save(model, name):
    path = OUT / f"{name}.onnx"
    onnx.save_model(model, str(path))
    saved = onnx.load_model(str(path))  # the JSON describes the file as written
    (OUT / f"{name}.json").write_text(json.dumps(model_json(saved), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes) and {name}.json")


def finish(graph, opsets, metadata=None):
    model = helper.make_model(graph, opset_imports=opsets, producer_name="earshot-fixtures",
                              producer_version="1.0")
    model.ir_version = 8
    if metadata:
        helper.set_model_props(model, metadata)
    return model


# --- initializers.onnx -----------------------------------------------------------------------

def typed(name, data_type, dims, values):
    """A tensor with its values in the typed field of its type (float_data, int32_data, ...)."""
    t = helper.make_tensor(name, data_type, dims, values, raw=False)
    assert not t.HasField("raw_data"), name
    return t


def raw(name, array):
    """A tensor with its values in raw_data."""
    t = numpy_helper.from_array(array, name)
    assert t.HasField("raw_data"), name
    return t


def initializers_model():
    f32 = np.array([[0.0, -0.0, 1.5, -2.25], [np.inf, -np.inf, np.nan, 1e-45],
                    [3.4028235e38, 1.17549435e-38, 0.1, -7.0]], dtype=np.float32)
    f16 = np.array([0.5, -1.75, 6.1035156e-05, 5.9604645e-08, 65504, -0.0, np.inf], dtype=np.float16)
    f64 = np.array([0.1, -1e300, 1e-50, np.pi, -0.0, 2.5], dtype=np.float64)
    bf16_bits = np.array([0x3F80, 0xC040, 0x7F7F, 0x0001, 0x8000, 0x7F80], dtype=np.uint16)
    i64 = np.array([np.iinfo(np.int64).min, -1, 0, 1, np.iinfo(np.int64).max], dtype=np.int64)
    i32 = np.array([np.iinfo(np.int32).min, -1, 0, 7, np.iinfo(np.int32).max], dtype=np.int32)
    tensors = [
        raw("f32_raw", f32),
        typed("f32_typed", TensorProto.FLOAT, [3], [1.0, -0.5, 0.1]),
        raw("f32_scalar", np.array(42.5, dtype=np.float32)),
        raw("f32_empty", np.zeros((0, 3), dtype=np.float32)),
        typed("f32_empty_typed", TensorProto.FLOAT, [2, 0], []),
        raw("f16_raw", f16),
        typed("f16_typed", TensorProto.FLOAT16, [7], f16),
        raw("f64_raw", f64.reshape(2, 3)),
        typed("f64_typed", TensorProto.DOUBLE, [6], f64.tolist()),
        helper.make_tensor("bf16_raw", TensorProto.BFLOAT16, [2, 3], bf16_bits.tobytes(), raw=True),
        typed("bf16_typed", TensorProto.BFLOAT16, [3], [1.0, -3.0, 0.333]),
        raw("i64_raw", i64),
        typed("i64_typed", TensorProto.INT64, [5], i64.tolist()),
        typed("i64_scalar", TensorProto.INT64, [], [-42]),
        raw("i32_raw", i32),
        typed("i32_typed", TensorProto.INT32, [5], i32.tolist()),
        raw("bool_raw", np.array([True, False, True], dtype=np.bool_)),
        typed("bool_typed", TensorProto.BOOL, [2, 2], [True, False, False, True]),
        raw("i8_raw", np.array([-128, -1, 0, 127], dtype=np.int8)),
        typed("i8_typed", TensorProto.INT8, [4], [-128, -1, 0, 127]),
        raw("u8_raw", np.array([0, 1, 200, 255], dtype=np.uint8)),
        typed("u8_typed", TensorProto.UINT8, [4], [0, 1, 200, 255]),
        raw("i16_raw", np.array([-32768, -2, 32767], dtype=np.int16)),
        typed("i16_typed", TensorProto.INT16, [3], [-32768, -2, 32767]),
        raw("u16_raw", np.array([0, 40000, 65535], dtype=np.uint16)),
        typed("u16_typed", TensorProto.UINT16, [3], [0, 40000, 65535]),
        raw("u32_raw", np.array([0, 3_000_000_000, 4294967295], dtype=np.uint32)),
        typed("u32_typed", TensorProto.UINT32, [3], [0, 3_000_000_000, 4294967295]),
        raw("u64_raw", np.array([0, 1, 2**63 - 1], dtype=np.uint64)),
        typed("u64_typed", TensorProto.UINT64, [3], [0, 1, 2**63 - 1]),
    ]
    # The typed forms really are in the fields the reader must take them from.
    by_name = {t.name: t for t in tensors}
    assert by_name["f32_typed"].float_data and by_name["f64_typed"].double_data
    assert by_name["f16_typed"].int32_data and by_name["bf16_typed"].int32_data
    assert by_name["i64_typed"].int64_data and by_name["u64_typed"].uint64_data and by_name["u32_typed"].uint64_data
    assert by_name["bool_typed"].int32_data and by_name["i8_typed"].int32_data

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])
    node = helper.make_node("Add", ["x", "f32_raw"], ["y"], name="add")
    graph = helper.make_graph([node], "initializers", [x], [y], initializer=tensors)
    return finish(graph, [helper.make_opsetid("", 17)])


# --- attributes.onnx -------------------------------------------------------------------------

def small_graph(name, scale):
    """A one-node graph with an initializer, for graph-valued attributes."""
    a = helper.make_tensor_value_info(f"{name}_in", TensorProto.FLOAT, ["n"])
    b = helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, ["n"])
    w = numpy_helper.from_array(np.array([scale], dtype=np.float32), f"{name}_w")
    node = helper.make_node("Mul", [f"{name}_in", f"{name}_w"], [f"{name}_out"], name=f"{name}_mul")
    return helper.make_graph([node], name, [a], [b], initializer=[w])


def attributes_model():
    A = onnx.AttributeProto
    everything = helper.make_node(
        "Everything", ["x"], ["e"], name="everything", domain="com.earshot.test",
        f=0.25, f_negative_zero=-0.0, f_infinity=float("inf"), f_subnormal=1e-45,
        i=-9_000_000_000, i_zero=0,
        s="hello, wörld ✓", s_invalid=b"a\xff\xe2\x82b\xc0",
        t=numpy_helper.from_array(np.array([[1, -2], [3, -4]], dtype=np.int64), "t_value"),
        g=small_graph("g_body", 2.0),
        floats=[1.0, -0.5, 3.4028235e38, 1e-45],
        ints=[-1, 0, 9_223_372_036_854_775_807, -9_223_372_036_854_775_808],
        strings=["a", "", "ünï"],
        tensors=[numpy_helper.from_array(np.array([0.5, 1.5], dtype=np.float32), "ta"),
                 helper.make_tensor("tb", TensorProto.INT32, [1], [7])],
        graphs=[small_graph("gs_first", 3.0), small_graph("gs_second", -1.0)],
    )
    everything.attribute.extend([helper.make_attribute("empty_floats", [], attr_type=A.FLOATS),
                                 helper.make_attribute("empty_ints", [], attr_type=A.INTS),
                                 helper.make_attribute("empty_strings", [], attr_type=A.STRINGS)])
    # Clip with its optional `min` left out: inputs ["e", "", "clip_max"].
    clip = helper.make_node("Clip", ["e", "", "clip_max"], ["clipped"], name="clip")
    clip_max = numpy_helper.from_array(np.array(6.0, dtype=np.float32), "clip_max")
    # Dropout's optional mask output left out, and a node without a name.
    dropout = helper.make_node("Dropout", ["clipped"], ["dropped", ""], name="dropout")
    constant = helper.make_node("Constant", [], ["c"], value_floats=[0.5, 0.25])
    add = helper.make_node("Add", ["dropped", "c"], ["y"])

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", None, 2])
    scale = helper.make_tensor_value_info("scale", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    extras = helper.make_tensor_value_info("extras", TensorProto.INT64, [4, "time"])
    value_info = [helper.make_tensor_value_info("clipped", TensorProto.FLOAT, ["batch", None, 2]),
                  helper.make_tensor_sequence_value_info("sequence", TensorProto.FLOAT, [2])]
    graph = helper.make_graph([everything, clip, dropout, constant, add], "attributes", [x, scale],
                              [y, extras], initializer=[clip_max], value_info=value_info)
    return finish(graph, [helper.make_opsetid("", 17), helper.make_opsetid("com.earshot.test", 1)],
                  metadata={"author": "Earshot", "purpose": "attribute fixtures", "ünïcode": "✓ yes"})


# --- subgraphs.onnx --------------------------------------------------------------------------

def subgraphs_model():
    # then: y = x * then_scale + then_bias (a Constant node)
    then_scale = numpy_helper.from_array(np.array([1.0, 2.0, 3.0], dtype=np.float32), "then_scale")
    then_const = helper.make_node("Constant", [], ["then_bias"], name="then_const",
                                  value=numpy_helper.from_array(np.array([0.5, -0.5, 0.0], dtype=np.float32), "bias"))
    then_mul = helper.make_node("Mul", ["x", "then_scale"], ["then_scaled"], name="then_mul")
    then_add = helper.make_node("Add", ["then_scaled", "then_bias"], ["then_out"], name="then_add")
    then_graph = helper.make_graph([then_const, then_mul, then_add], "then_body", [],
                                   [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, ["N", 3])],
                                   initializer=[then_scale])

    # else: an If of its own on `x` being positive somewhere, both branches Constant nodes.
    inner_then = helper.make_graph(
        [helper.make_node("Constant", [], ["inner_one"], name="inner_one", value_float=1.0),
         helper.make_node("Sub", ["x", "inner_one"], ["inner_then_out"], name="inner_sub")],
        "inner_then", [], [helper.make_tensor_value_info("inner_then_out", TensorProto.FLOAT, ["N", 3])])
    inner_else = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["inner_else_out"], name="inner_neg")],
        "inner_else", [], [helper.make_tensor_value_info("inner_else_out", TensorProto.FLOAT, ["N", 3])])
    else_shift = numpy_helper.from_array(np.array(4, dtype=np.int64), "else_shift")
    else_nodes = [
        helper.make_node("ReduceMax", ["x"], ["else_max"], name="else_max", keepdims=0),
        helper.make_node("Constant", [], ["else_zero"], name="else_zero", value_float=0.0),
        helper.make_node("Greater", ["else_max", "else_zero"], ["else_cond"], name="else_greater"),
        helper.make_node("If", ["else_cond"], ["else_inner"], name="inner_if",
                         then_branch=inner_then, else_branch=inner_else),
        helper.make_node("Cast", ["else_shift"], ["else_shift_f"], name="else_cast", to=TensorProto.FLOAT),
        helper.make_node("Add", ["else_inner", "else_shift_f"], ["else_out"], name="else_add"),
    ]
    else_graph = helper.make_graph(else_nodes, "else_body", [],
                                   [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, ["N", 3])],
                                   initializer=[else_shift])

    branch = helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_graph, else_branch=else_graph)
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    graph = helper.make_graph([branch], "subgraphs", [cond, x], [y])
    model = finish(graph, [helper.make_opsetid("", 17)], metadata={"levels": "3"})
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    save(initializers_model(), "initializers")
    save(attributes_model(), "attributes")
    save(subgraphs_model(), "subgraphs")


if __name__ == "__main__":
    main()
