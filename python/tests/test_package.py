"""The package as a package: one explicit API with a docstring on every public name, type stubs, arrays accepted by
every op with clear refusals, and errors that say what to write when a Python value is asked of a traced tensor."""

import ast
import inspect
import os

import numpy as np
import pytest

import vtape as vt
import vtape.numpy as jnp
from vtape import _vtape, lax

NAMESPACES = ["vtape", "vtape.numpy", "vtape.numpy.linalg", "vtape.lax", "vtape.nn", "vtape.tree_util",
              "vtape.scipy.linalg", "vtape.scipy.special", "vtape.scipy.stats"]


def _doc_body(name, doc):
    """A docstring without the signature line nanobind puts first."""
    doc = doc or ""
    if doc.startswith(name + "(") and " -> " in doc.split("\n", 1)[0]:
        doc = doc.split("\n", 1)[1] if "\n" in doc else ""
    return doc.strip()


def _public(module):
    for name in dir(module):
        value = getattr(module, name)
        if not name.startswith("_") and callable(value) and not inspect.ismodule(value):
            yield name, value


@pytest.mark.parametrize("module_name", NAMESPACES)
def test_every_public_function_has_a_docstring(module_name):
    module = __import__(module_name, fromlist=["_"])
    missing = [name for name, value in _public(module) if not _doc_body(name, value.__doc__)]
    assert not missing, f"{module_name}: no docstring on {missing}"


def test_every_tensor_method_has_a_docstring():
    missing = [name for name in dir(vt.Tensor) if not name.startswith("_")
               and not _doc_body(name, getattr(vt.Tensor, name).__doc__)]
    assert not missing


def test_the_ops_are_the_bindings_themselves():
    # No wrapper between vtape.exp and the compiled op: nothing retries a call or hides its TypeError.
    for name in ["exp", "add", "where", "matmul", "cho_solve", "segment_sum", "stack"]:
        assert getattr(vt, name) is getattr(_vtape, name), name
    with pytest.raises(TypeError, match="incompatible function arguments"):
        vt.exp(np.ones(2), 3)


def test_stubs_and_py_typed_beside_the_module():
    package = os.path.dirname(_vtape.__file__)
    assert os.path.exists(os.path.join(package, "py.typed"))
    with open(os.path.join(package, "_vtape.pyi")) as f:
        stub = ast.parse(f.read())
    functions = {n.name for n in stub.body if isinstance(n, ast.FunctionDef)}
    assert {"exp", "cho_solve", "where", "segment_sum", "triangular_solve"} <= functions
    tensor = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    methods = {n.name for n in tensor.body if isinstance(n, ast.FunctionDef)}
    # Operators, indexing and .at are the class's own, so that type checkers see them.
    assert {"__add__", "__rmatmul__", "__getitem__", "__le__", "at", "astype", "sum", "item"} <= methods


def test_arrays_numbers_and_lists_wherever_a_tensor_goes():
    x32 = np.array([1.0, 4.0], dtype=np.float32)
    assert vt.add(x32, 0.5).dtype == np.float32  # a Python number is weak beside an array, as beside a tensor
    assert vt.add(0.5, x32).dtype == np.float32
    assert vt.add(np.arange(3), 2).dtype == np.int64
    assert vt.add(0, 0).dtype == np.int64 and int(vt.add(0, 0)) == 0
    np.testing.assert_allclose(np.asarray(vt.sqrt(x32)), [1.0, 2.0])
    np.testing.assert_allclose(np.asarray(vt.exp(0.5)), np.exp(0.5))
    np.testing.assert_allclose(np.asarray(vt.stack([1.0, np.array(2.0), vt.asarray(3.0)])), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(np.asarray(vt.where(x32 > 2, x32, 0)), [0.0, 4.0])
    np.testing.assert_allclose(np.asarray(np.ones((2, 2)) @ vt.asarray(np.eye(2))), np.ones((2, 2)))
    assert float(vt.pow(np.float64(2.0), 3)) == 8.0
    # A list of traced scalars is stacked (derivatives flow), as jnp.array's.
    g = vt.grad(lambda t: vt.sum(vt.asarray([t, 2.0 * t]) ** 2))(np.float64(1.5))
    assert float(g) == pytest.approx(2 * 1.5 + 8 * 1.5)


def test_complex_and_unsigned_inputs_are_refused_by_every_op():
    with pytest.raises(TypeError, match="complex"):
        vt.exp(np.array([1.0 + 2.0j]))
    with pytest.raises(TypeError, match="complex"):
        vt.asarray([1.0]) + np.array([1j])
    with pytest.raises(TypeError, match="do not fit int64"):
        vt.add(np.array([2**63], dtype=np.uint64), 1)
    assert vt.add(np.array([7], dtype=np.uint32), 1).dtype == np.int64  # unsigned values that fit: int64


def _raises(kind, match, f, *args):
    with pytest.raises(kind, match=match) as info:
        f(*args)
    return info.value


def test_a_python_if_on_a_traced_value_points_to_cond_and_where():
    def f(x):
        if x > 0:
            return x
        return -x

    for transformed, x in [(vt.jit(f), np.array(1.0)), (vt.jit(vt.vmap(vt.grad(f))), np.array([1.0, -2.0]))]:
        e = _raises(vt.ConcretizationError, r"bool\(\) of a traced bool tensor.*lax\.cond.*numpy\.where", transformed, x)
        assert isinstance(e, TypeError) and isinstance(e, vt.Error)
    _raises(TypeError, r"bool\(\) of a batched bool tensor.*every example has its own value", vt.vmap(f),
            np.array([1.0, -2.0]))
    # Under grad alone the value is there, as in JAX: Python control flow works.
    assert float(vt.grad(f)(np.array(-3.0))) == -1.0
    assert float(vt.grad(f)(np.array(3.0))) == 1.0


def test_float_of_a_differentiated_value_raises_instead_of_a_zero_gradient():
    _raises(vt.ConcretizationError, r"float\(\) of a float64 tensor of shape \(\) that grad differentiates.*silently "
            r"zero.*stop_gradient", vt.grad(lambda x: float(x) * x), np.array(2.0))
    _raises(TypeError, "that grad differentiates", vt.grad(lambda x: vt.sum(np.asarray(x) * x)), np.ones(2))
    _raises(TypeError, r"float\(\) of a traced", vt.jit(lambda x: float(x)), np.array(2.0))
    # Cutting the gradient on purpose, and reading a result after the transform, are fine.
    assert float(vt.grad(lambda x: float(vt.stop_gradient(x)) * x)(np.array(2.0))) == 2.0
    value, grad = vt.value_and_grad(lambda x: x * x)(np.array(3.0))
    assert float(value) == 9.0 and float(grad) == 6.0
    out, pullback = vt.vjp(lambda x: x * x, np.array(3.0))
    assert float(out) == 9.0


def test_a_numpy_array_indexed_by_a_loop_index_says_to_make_it_a_tensor():
    coef = np.array([1.0, 2.0, 3.0])

    def bad(x):
        return lax.fori_loop(0, 3, lambda i, acc: acc * x + coef[i], 0.0)

    def good(x):
        c = jnp.asarray(coef)
        return lax.fori_loop(0, 3, lambda i, acc: acc * x + c[i], 0.0)

    for transform in [lambda f: f, vt.jit, vt.grad]:
        _raises(TypeError, r"traced int64 tensor.*index into a numpy array.*vtape\.numpy\.asarray\(a\)\[i\]",
                transform(bad), np.array(2.0))
    assert float(good(np.array(2.0))) == 1.0 * 4 + 2.0 * 2 + 3.0
    assert float(vt.grad(good)(np.array(2.0))) == 2 * 1.0 * 2 + 2.0
