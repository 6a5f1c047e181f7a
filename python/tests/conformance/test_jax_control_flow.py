"""JAX's tests/lax_control_flow_test.py (LaxControlFlowTest), ported to vtape's scan, fori_loop, while_loop and cond.

JAX's integer counters become float carries where the integers are incidental (JAX compares with check_dtypes=False
there); the integer form itself is counted as unsupported. JAX's scan_reference and while_loop_reference are ported
over vtape's ops, so a loop is compared with the same ops unrolled, at JAX's tolerances. JAX's scan implementations
are lax.scan (vtape.scan), unroll=0/2 (unsupported: unroll=) and the jax.checkpoint'ed scan (vtape's remat of a scan is
checkpoint_every=k, run here with k=2). jax.linearize(f, x)[1](t) is vtape.jvp(f, (x,), (t,))[1].
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import _jtu as jtu
import vtape as vt

deliberate = pytest.mark.deliberate
unsupported = pytest.mark.unsupported


def defect(why: str):
    return pytest.mark.xfail(strict=True, reason=f"defect: {why}")


def le(a, b):
    """a <= b as a 0/1 mask: vtape's Tensor has no <= operator (test_le_operator counts that form)."""
    return 1.0 - vt.greater(vt.asarray(a), vt.asarray(b))


def scan_reference(f, init, xs):
    carry = init
    ys = []
    for x in xs:
        (carry, y) = f(carry, x)
        ys.append(vt.reshape(y, (1,) + tuple(vt.asarray(y).shape)))
    ys = vt.concatenate(ys, 0)
    return carry, ys


def while_loop_reference(cond, body, carry):
    while bool(cond(carry)):
        carry = body(carry)
    return carry


def _scan_checkpointed(f, init, xs=None, **kw):
    return vt.scan(f, init, xs, checkpoint_every=2, **kw)


def _scan_unroll2(f, init, xs=None, **kw):
    return vt.scan(f, init, xs, unroll=2, **kw)


SCAN_IMPLS = [
    pytest.param(vt.scan, id="impl=scan"),
    pytest.param(_scan_checkpointed, id="impl=checkpoint_every2"),
]
SCAN_IMPL_UNROLL = pytest.param(_scan_unroll2, id="impl=unroll2")


def cond_via_switch(pred, true_fun, false_fun, *args):
    index = vt.astype(vt.asarray(pred), "int32")
    return vt.lax.switch(index, [false_fun, true_fun], *args)


COND_IMPLS = [
    pytest.param(vt.cond, id="cond"),
    pytest.param(cond_via_switch, id="switch"),
]


# --- while_loop -------------------------------------------------------------------------------------------------


def test_callable_errors():
    """JAX: LaxControlFlowTest.testCallableErrors"""
    not_callable = 42
    with pytest.raises(TypeError, match="callable"):
        vt.fori_loop(0, 1, not_callable, 0.0)
    with pytest.raises(TypeError, match="callable"):
        vt.while_loop(not_callable, not_callable, 0.0)
    with pytest.raises(TypeError, match="callable"):
        vt.cond(0, not_callable, not_callable)
    with pytest.raises(TypeError, match="callable"):
        vt.scan(not_callable, 0.0, np.arange(3.0))


def _while_with_tuple_loop(init):
    limit = 10

    def loop_cond(state):
        pos, _ = state
        return pos < limit

    def loop_body(state):
        pos, count = state
        return (pos + 1, count + 1)

    _, count = vt.while_loop(loop_cond, loop_body, (init, 0.0 * init))
    return count


def test_while_with_tuple():
    """JAX: LaxControlFlowTest.testWhileWithTuple (float counters)"""
    limit = 10
    cloop = vt.jit(_while_with_tuple_loop)
    assert float(_while_with_tuple_loop(2.0)) == limit - 2
    assert float(cloop(2.0)) == limit - 2
    assert float(cloop(2.0)) == limit - 2
    assert float(cloop(3.0)) == limit - 3


def test_while_with_tuple_int_carries():
    """JAX: LaxControlFlowTest.testWhileWithTuple (its integer counters as written)"""
    result = vt.while_loop(lambda s: s[0] < 10, lambda s: (s[0] + 1, s[1] + 1), (2, 0))
    assert int(result[1]) == 8 and result[0].dtype == np.int64 and result[1].dtype == np.int64


def test_while_with_many_args():
    """JAX: LaxControlFlowTest.testWhileWithManyArgs (256 carries)"""
    nargs = 256
    out = vt.while_loop(lambda state: state[0] < 2, lambda state: tuple(s + 1 for s in state), (0.0,) * nargs)
    assert len(out) == nargs
    np.testing.assert_array_equal([float(o) for o in out], [2.0] * nargs)


def _nested_while_outer(num):
    def cond_fun(state):
        num, i, _ = state
        return i < num

    def body_fun(state):
        num, i, count = state
        return (num, i + 1, _nested_while_inner(i, count))

    _, i, count = vt.while_loop(cond_fun, body_fun, (num, 0.0 * num, 0.0 * num))
    return (i, count)


def _nested_while_inner(i, count):
    def cond_fun(state):
        i, j, _ = state
        return le(j, i)

    def body_fun(state):
        i, j, count = state
        return (i, j + 1, count + 1)

    _, _, count = vt.while_loop(cond_fun, body_fun, (i, 0.0 * i, count))
    return count


def test_nested_while():
    """JAX: LaxControlFlowTest.testNestedWhile (float counters)"""
    cloop = vt.jit(_nested_while_outer)
    outer = lambda n: tuple(float(v) for v in _nested_while_outer(vt.asarray(float(n))))  # noqa: E731
    jitted = lambda n: tuple(float(v) for v in cloop(float(n)))  # noqa: E731
    assert outer(3) == (3, 6)
    assert jitted(3) == (3, 6)
    assert jitted(3) == (3, 6)
    assert jitted(2) == (2, 3)
    assert jitted(4) == (4, 10)


def test_while_with_closure():
    """JAX: LaxControlFlowTest.testWhileWithClosure"""
    effect = [False]

    def loop(init, local_limit, inc):
        def loop_cond(state):
            pos, _ = state
            return pos < local_limit

        def loop_body(state):
            effect[0] = True
            pos, count = state
            return (pos + 1, count + inc)

        _, count = vt.while_loop(loop_cond, loop_body, (init, 0.0 * init))
        return count

    cloop = vt.jit(loop)
    limit = 10.0
    assert float(loop(vt.asarray(2.0), limit, 1.0)) == limit - 2
    assert effect[0]
    effect[0] = False
    assert float(cloop(2.0, limit, 1.0)) == limit - 2
    assert effect[0]
    effect[0] = False
    assert float(cloop(2.0, limit, 1.0)) == limit - 2
    assert float(cloop(3.0, limit, 1.0)) == limit - 3
    assert not effect[0]


def test_while_with_closure_jit():
    """JAX: LaxControlFlowTest.testWhileWithClosureJit"""
    effect = [False]

    def loop(init, local_limit, inc):
        def loop_cond(state):
            pos, _ = state
            return pos < local_limit

        def loop_body(state):
            effect[0] = True
            pos, count = state
            f = lambda pos, inc: (pos + 1, count + inc)  # noqa: E731
            return vt.jit(f)(pos, inc)

        _, count = vt.while_loop(loop_cond, loop_body, (init, 0.0 * init))
        return count

    cloop = vt.jit(loop)
    limit = 10.0
    assert float(loop(vt.asarray(2.0), limit, 1.0)) == limit - 2
    assert effect[0]
    effect[0] = False
    assert float(cloop(2.0, limit, 1.0)) == limit - 2
    assert effect[0]
    effect[0] = False
    assert float(cloop(2.0, limit, 1.0)) == limit - 2
    assert float(cloop(3.0, limit, 1.0)) == limit - 3
    assert not effect[0]


def test_while_type_errors_structure():
    """JAX: LaxControlFlowTest.testWhileTypeErrors (body carry of another structure: TypeError)"""
    with pytest.raises(TypeError, match="structure"):
        vt.while_loop(lambda c: True, lambda c: (1.0, 1.0), 0.0)


@deliberate("a predicate is any scalar, nonzero meaning true (as where reads its condition), where JAX requires a "
            "bool; a non-scalar one raises vtape.Error, a ValueError, naming its shape, where JAX raises TypeError")
def test_while_type_errors_predicate():
    """JAX: LaxControlFlowTest.testWhileTypeErrors (cond_fun must return a boolean scalar)"""
    with pytest.raises(vt.Error, match=r"predicate has shape \[2\]"):
        vt.while_loop(lambda c: (1.0, 1.0), lambda c: c, 0.0)
    # JAX rejects a float32 predicate; vtape takes it (nonzero is true).
    out = vt.while_loop(lambda c: vt.astype(c < 3, "float32"), lambda c: c + 1, np.float32(0.0))
    assert out.dtype == np.float32 and float(out) == 3.0


def test_nested_while_with_dynamic_update_slice():
    """JAX: LaxControlFlowTest.testNestedWhileWithDynamicUpdateSlice"""
    arr = np.random.RandomState(0).randn(5, 5)

    def outer_loop(arr):
        def body_fun(state):
            i, num, arr, out = state

            def inner_body(s):
                i, j, arr, out = s
                out = vt.lax.dynamic_update_slice(out, vt.reshape(arr[i][j], (1, 1)), (i, j))
                return (i, j + 1, arr, out)

            _, _, _, out = vt.while_loop(lambda s: le(s[1], s[0]), inner_body, (i, 0, arr, out))
            return (i + 1, num, arr, out)

        _, _, _, out = vt.while_loop(lambda s: s[0] < s[1], body_fun, (0, 5, arr, vt.zeros(arr.shape)))
        return out

    jtu.assert_all_close(outer_loop(arr), np.tril(arr), check_dtypes=False)


def test_loop_with_conjunction_condition():
    """JAX: LaxControlFlowTest.testLoopWithConjunctionCondition"""
    x = np.random.RandomState(0).randn(10)

    def sum_first_n(arr, num):
        def cond_fun(state):
            arr, num, i, _ = state
            return (i < num) * (i < arr.shape[0])

        def body_fun(state):
            arr, num, i, total = state
            return (arr, num, i + 1, total + arr[i])

        _, _, _, total = vt.while_loop(cond_fun, body_fun, (arr, num, 0, 0.0))
        return total

    for num in [0, 5, 10, 15]:
        jtu.assert_all_close(sum_first_n(x, num), np.sum(x[:num]), check_dtypes=False)


def test_while_loop_batched():
    """JAX: LaxControlFlowTest.testWhileLoopBatched (float counters)"""
    def fun(x):
        return vt.while_loop(lambda x: x < 3, lambda x: x + 2, x)

    expected = np.array([4, 3, 4, 3])
    jtu.assert_all_close(vt.vmap(fun)(np.array([0.0, 1.0, 2.0, 3.0])), expected, check_dtypes=False)
    jtu.assert_all_close(vt.vmap(vt.jit(fun))(np.array([0.0, 1.0, 2.0, 3.0])), expected, check_dtypes=False)


def test_while_loop_batched_int():
    """JAX: LaxControlFlowTest.testWhileLoopBatched (its integer carry as written)"""
    ans = vt.vmap(lambda x: vt.while_loop(lambda x: x < 3, lambda x: x + 2, x))(np.array([0, 1, 2, 3]))
    jtu.assert_all_close(ans, np.array([4, 3, 4, 3]))


@unsupported("vmap axis_name and lax.axis_index")
def test_while_loop_axis_index_batched():
    """JAX: LaxControlFlowTest.testWhileLoopAxisIndexBatched"""
    fun = lambda x: vt.while_loop(lambda x: x < vt.axis_index("i"), lambda x: x + 2, x)  # noqa: E731
    ans = vt.vmap(fun, axis_name="i")(np.array([0, 0, 0, 0], dtype="int32"))
    jtu.assert_all_close(ans, np.array([0, 2, 2, 4]), check_dtypes=False)


def test_while_loop_batched_with_const_body():
    """JAX: LaxControlFlowTest.testWhileLoopBatchedWithConstBody"""
    def f(x):
        def body_fn(_):
            return vt.asarray(0.0, dtype="float32")

        def cond_fn(_):
            return (not False) == False  # noqa: E712  (JAX's jnp.logical_not(False) == False)

        return vt.while_loop(cond_fn, body_fn, x)

    x = np.arange(5, dtype=np.float32)
    jtu.assert_all_close(vt.vmap(f)(x), x)


def test_while_loop_cond_consts_batched():
    """JAX: LaxControlFlowTest.testWhileLoopCondConstsBatched"""
    fun = lambda x, y: vt.while_loop(lambda x: x < y, lambda x: x + 2, x)  # noqa: E731
    ans = vt.vmap(fun, in_axes=(None, 0))(0.0, np.array([2.0, 3.0]))
    jtu.assert_all_close(ans, np.array([2, 4]), check_dtypes=False)


def test_while_loop_body_consts_batched():
    """JAX: LaxControlFlowTest.testWhileLoopBodyConstsBatched"""
    fun = lambda x, y: vt.while_loop(lambda x: x < 3, lambda x: x + y, x)  # noqa: E731
    ans = vt.vmap(fun, in_axes=(None, 0))(0.0, np.array([2.0, 3.0]))
    jtu.assert_all_close(ans, np.array([4, 3]), check_dtypes=False)


def test_while_loop_tuple_batched():
    """JAX: LaxControlFlowTest.testWhileLoopTupleBatched"""
    def cond_fun(loop_carry):
        x, y = loop_carry
        return x + y < 5

    def body_fun(loop_carry):
        x, y = loop_carry
        return x + 1, y

    fun = lambda x, y: vt.while_loop(cond_fun, body_fun, (x, y))  # noqa: E731
    ans = vt.vmap(fun)(np.array([0.0, 0.0]), np.array([1.0, 2.0]))
    jtu.assert_all_close(ans, (np.array([4, 3]), np.array([1, 2])), check_dtypes=False)


def test_issue_3204():
    """JAX: LaxControlFlowTest.test_issue_3204 (vmap of nested while loops; float counters)"""
    def test(a, b):
        condfun_1 = lambda inp: inp[1] < a + 1  # noqa: E731
        condfun_2 = lambda inp: inp[2] < b + 1  # noqa: E731

        def bodyfun_1(inp):
            val, i, j = inp
            j = 0.0 * j

            def bodyfun_2(inp):
                val, i, j = inp
                return (val + i + j, i, j + 1)

            val = vt.while_loop(condfun_2, bodyfun_2, (val, i, j))[0]
            return (val, i + 1, j)

        return vt.while_loop(condfun_1, bodyfun_1, (0.0 * a, 0.0 * a, 0.0 * a))[0]

    arr = np.arange(5.0)
    ans = vt.vmap(test, (0, 0))(arr, arr)
    # sum over i <= a, j <= b of i + j
    expected = [sum(i + j for i in range(n + 1) for j in range(n + 1)) for n in range(5)]
    jtu.assert_all_close(ans, np.array(expected, dtype=float))


# --- fori_loop --------------------------------------------------------------------------------------------------


def test_fori_loop_scalar_limits():
    """JAX: LaxControlFlowTest.testForiLoopScalarLimits"""
    body = lambda i, c: c + 1  # noqa: E731
    init = np.float32(10)
    result = vt.fori_loop(np.int16(0), 10, body, init)
    assert result.dtype == np.float32 and float(result) == init + 10
    result = vt.fori_loop(0, np.int16(10), body, init)
    assert result.dtype == np.float32 and float(result) == init + 10


def test_fori_loop_supports_unrolling():
    """JAX: LaxControlFlowTest.test_fori_loop_supports_unrolling"""
    init = np.float32(10)
    assert float(vt.fori_loop(np.int16(0), 10, lambda i, c: c + 1, init, unroll=3)) == init + 10


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("upper", [0, -1])
@pytest.mark.parametrize("unroll", [False, True])
def test_fori_loop_returns_init_with_nonpositive_length(jit, upper, unroll):
    """JAX: LaxControlFlowTest.test_fori_loop_returns_init_with_nonpositive_length"""
    kw = {"unroll": True} if unroll else {}  # unroll=False is the default: nothing to pass
    loop = partial(vt.fori_loop, 0, upper, lambda i, c: c + 1, **kw)
    if jit:
        loop = vt.jit(loop)
    init = np.float32(10)
    assert float(loop(init)) == init


def test_fori_loop_batched():
    """JAX: LaxControlFlowTest.testForiLoopBatched (float carries)"""
    def body_fun(i, loop_carry):
        x, y = loop_carry
        return x + 1, y + 2

    fun = lambda x: vt.fori_loop(0, 10, body_fun, (x, 0.0))  # noqa: E731
    ans = vt.vmap(fun)(np.array([0.0, 1.0]))
    jtu.assert_all_close(ans, (np.array([10, 11]), np.array([20, 20])), check_dtypes=False)


def test_fori_loop_basic():
    """JAX: LaxControlFlowTest.testForiLoopBasic (float total; the bound a Python int)"""
    count = lambda num: vt.fori_loop(0, num, lambda i, tot: tot + i, 0.0)  # noqa: E731
    assert float(count(2)) == 1
    assert float(count(3)) == 3
    assert float(count(4)) == 6


def test_fori_loop_basic_compile():
    """JAX: LaxControlFlowTest.testForiLoopBasic (_CompileAndCheck: the bound traced)"""
    count = lambda num: vt.fori_loop(0, num, lambda i, tot: tot + i, 0.0)  # noqa: E731
    for n in [2, 3, 4]:
        jtu.compile_and_check(count, lambda: [n])


def test_fori_loop_closure():
    """JAX: LaxControlFlowTest.testForiLoopClosure (eager; the jitted half needs traced bounds)"""
    def count(num):
        return vt.fori_loop(0, num, lambda i, tot: num + (tot + i), 0.0)

    assert float(count(2)) == 1 + 2**2
    assert float(count(3)) == 3 + 3**2
    assert float(count(4)) == 6 + 4**2


def test_fori_loop_closure_jit():
    """JAX: LaxControlFlowTest.testForiLoopClosure (cfun = jit(count))"""
    cfun = vt.jit(lambda num: vt.fori_loop(0, num, lambda i, tot: num + (tot + i), 0.0))
    assert float(cfun(2)) == 1 + 2**2


def _sum_first_n_tuple(arr, num):
    def body_fun(i, state):
        arr, total = state
        return (arr, total + arr[i])

    _, total = vt.fori_loop(0, min(arr.shape[0], num), body_fun, (arr, np.float64(0)))
    return total


def _sum_first_n_dict(arr, num):
    def body_fun(i, state):
        arr, total = state["arr"], state["total"]
        return {"arr": arr, "total": total + arr[i]}

    return vt.fori_loop(0, min(arr.shape[0], num), body_fun, {"arr": arr, "total": np.float64(0)})["total"]


def _sum_first_n_empty_tuple(arr, num):
    def body_fun(i, state):
        arr, total, _ = state
        return (arr, total + arr[i], ())

    _, tot, _ = vt.fori_loop(0, min(arr.shape[0], num), body_fun, (arr, np.float64(0), ()))
    return tot


@pytest.mark.parametrize("sum_first_n", [
    pytest.param(_sum_first_n_tuple, id="testForiLoopTupleState"),
    pytest.param(_sum_first_n_dict, id="testForiLoopDictState"),
    pytest.param(_sum_first_n_empty_tuple, id="testForiLoopEmptyTupleInState"),
])
@pytest.mark.parametrize("num", [0, 5, 10, 15])
def test_fori_loop_state(sum_first_n, num):
    """JAX: LaxControlFlowTest.testForiLoopTupleState, testForiLoopDictState, testForiLoopEmptyTupleInState (jit with
    num a constant: a traced bound is test_fori_loop_state_traced_num)"""
    x = np.random.RandomState(0).randn(10)
    jtu.assert_all_close(sum_first_n(vt.asarray(x), num), np.sum(x[:num]), check_dtypes=False)
    cfun = vt.jit(lambda x: sum_first_n(x, num))
    jtu.assert_all_close(cfun(x), np.sum(x[:num]), check_dtypes=False)
    jtu.assert_all_close(cfun(x), np.sum(x[:num]), check_dtypes=False)


@unsupported("fori_loop with traced bounds")
def test_fori_loop_state_traced_num():
    """JAX: LaxControlFlowTest.testForiLoopTupleState (cfun = jit(sum_first_n): num traced)"""
    x = np.random.RandomState(0).randn(10)
    jtu.assert_all_close(vt.jit(_sum_first_n_tuple)(x, 5), np.sum(x[:5]), check_dtypes=False)


def test_fori_loop_issue8152():
    """JAX: LaxControlFlowTest.testForiLoopIssue8152"""
    y = vt.fori_loop(lower=0, upper=0, body_fun=lambda x, i: x + i, init_val=1.0)
    jtu.assert_all_close(y, 1.0, check_dtypes=False)
    carry, out = vt.scan(lambda c, x: (c + x, x), 0.0, np.array([]))
    jtu.assert_all_close(carry, 0.0, check_dtypes=False)
    assert out.shape == (0,)


# --- cond -------------------------------------------------------------------------------------------------------


def test_cond():
    """JAX: LaxControlFlowTest.testCond"""
    def fun(x):
        if x < 3:
            return (x, x)
        y = 2 * x
        return y, 2 * y

    @vt.jit
    def cfun(x):
        def false_fun(x):
            y = 2 * x
            return y, 2 * y

        return vt.cond(x < 3, lambda x: (x, x), false_fun, x)

    for x, want in [(0, (0, 0)), (1, (1, 1)), (2, (2, 2)), (3, (6, 12)), (4, (8, 16))]:
        assert fun(x) == want
        jtu.assert_all_close(cfun(x), want, check_dtypes=False)


def test_cond_pred_is_none():
    """JAX: LaxControlFlowTest.testCondPredIsNone"""
    f = lambda pred, x: vt.cond(pred, lambda x: x + 1, lambda x: x + 2, x)  # noqa: E731
    with pytest.raises(TypeError):
        f(None, 1.0)
    with pytest.raises(TypeError):
        vt.jit(f)(None, 1.0)


def test_cond_two_operands():
    """JAX: LaxControlFlowTest.testCondTwoOperands (x a numpy scalar; Python ints are
    test_cond_two_operands_python_scalars)"""
    fun = lambda x: x + x if x == 0 else x * x  # noqa: E731
    cfun = lambda x: vt.cond(x == 0, vt.add, vt.mul, x, x)  # noqa: E731
    for x in [np.array(0.0), np.array(1.0), np.array(3.0)]:
        jtu.assert_all_close(cfun(x), fun(x), check_dtypes=False)
        jtu.assert_all_close(vt.jit(cfun)(x), fun(x), check_dtypes=False)


def test_cond_two_operands_python_scalars():
    """JAX: LaxControlFlowTest.testCondTwoOperands (cfun(0): lax.add of two Python ints)"""
    assert float(vt.cond(0 == 0, vt.add, vt.mul, 0, 0)) == 0


def test_cond_three_operands():
    """JAX: LaxControlFlowTest.testCondThreeOperands"""
    add = lambda x, y, z: x + y + z  # noqa: E731
    mul = lambda x, y, z: x * y * z  # noqa: E731
    fun = lambda x: add(x, x, x) if x == 0 else mul(x, x, x)  # noqa: E731
    cfun = lambda x: vt.cond(x == 0, add, mul, x, x, x)  # noqa: E731
    for x in [0, 1, 2]:
        jtu.assert_all_close(cfun(x), fun(x), check_dtypes=False)
        jtu.assert_all_close(vt.jit(cfun)(x), fun(x), check_dtypes=False)


def test_cond_callable_operands():
    """JAX: LaxControlFlowTest.testCondCallableOperands"""
    class Foo:
        def __init__(self, x):
            self.x = x

    vt.tree_util.register_pytree_node(Foo, lambda f: ((f.x,), None), lambda _, xs: Foo(*xs))
    a = vt.cond(True, lambda a, b: a + b, lambda a, b: a + b, 3.0, 4.0)
    b = vt.cond(True, lambda a, b: a + b.x, lambda a, b: a + b.x, 3.0, Foo(4.0))
    assert float(a) == float(b)


def _switch_branches():
    def branch(x):
        y = 2 * x
        return y, 2 * y

    return [lambda x: (x, x), branch, lambda x: (x, -x)]


def test_switch():
    """JAX: LaxControlFlowTest.testSwitch"""
    branches = _switch_branches()
    for x in [-1, 0, 1, 2, 3]:
        want = branches[min(max(x, 0), 2)](x)
        jtu.assert_all_close(vt.lax.switch(x, branches, x), want, check_dtypes=False)
        jtu.assert_all_close(vt.jit(lambda x: vt.lax.switch(x, branches, x))(x), want, check_dtypes=False)


def test_switch_multi_operands():
    """JAX: LaxControlFlowTest.testSwitchMultiOperands"""
    branches = [vt.add, vt.mul]
    for x in [-1.0, 0.0, 1.0, 2.0]:
        want = branches[0 if x <= 0 else 1](np.array(x), np.array(x))
        jtu.assert_all_close(vt.lax.switch(int(x), branches, np.array(x), np.array(x)), want)


def test_one_branch_switch():
    """JAX: LaxControlFlowTest.testOneBranchSwitch"""
    branch = lambda x: -x  # noqa: E731
    for i in [-1, 0, 1]:
        assert float(vt.lax.switch(i, [branch], 7.0)) == -7.0


def test_switch_jvp():
    """JAX: LaxControlFlowTest.testSwitchJVP"""
    branches = _switch_branches()
    fun = lambda x: vt.lax.switch(vt.astype(x // 1, "int32"), branches, x)  # noqa: E731
    for x in [-0.7, 0.7, 1.7, 2.7, 3.7]:
        jtu.check_grads(fun, (x,), order=2, modes=["fwd"])


def test_switch_grad():
    """JAX: LaxControlFlowTest.testSwitchGrad"""
    branches = [lambda x: 3.0 * x, lambda x: vt.sin(x), lambda x: -x]
    f = vt.jit(lambda x: vt.lax.switch(vt.astype(x // 1, "int32"), branches, x))
    for x in [-0.7, 0.7, 1.7, 2.7, 3.7]:
        jtu.check_grads(f, (x,), order=2, modes=["fwd", "rev"])


def test_switch_batched():
    """JAX: LaxControlFlowTest.testSwitchBatched"""
    def fun(index, x, y, z):
        branches = [lambda xyz: xyz[0], lambda xyz: -xyz[1], lambda xyz: vt.sign(xyz[2])]
        return vt.lax.switch(index, branches, (x, y, z))

    ans = vt.vmap(fun, (0, 0, None, None))(np.array([0, 1]), np.array([1, 2]), np.array(5), np.array(9))
    jtu.assert_all_close(ans, np.array([1, -5]), check_dtypes=False)


@pytest.mark.parametrize("pred", [0, 0.0, 1, 1.0])
def test_issue1379(pred):
    """JAX: LaxControlFlowTest.testIssue1379 (the branches return a Python bool: vtape gives it as float64 0/1,
    JAX's assertion is fun(pred) == jit(fun)(pred))"""
    fun = lambda pred: vt.cond(pred, lambda x: (True, x), lambda x: (False, x), pred)  # noqa: E731
    eager, jitted = fun(pred), vt.jit(fun)(pred)
    jtu.assert_all_close(eager, jitted, check_dtypes=False)
    jtu.assert_all_close(jitted, (float(bool(pred)), pred), check_dtypes=False)


def test_issue1379_wrong_type():
    """JAX: LaxControlFlowTest.testIssue1379 (a string predicate raises TypeError)"""
    fun = lambda pred: vt.cond(pred, lambda x: (True, x), lambda x: (False, x), pred)  # noqa: E731
    for f in [fun, vt.jit(fun)]:
        with pytest.raises(TypeError):
            f("abc")


@deliberate("a predicate of a shape other than () raises vtape.Error (a ValueError) naming the shape, where JAX "
            "raises TypeError (vtape's errors for shapes are ValueErrors)")
def test_issue1379_non_scalar_predicate():
    """JAX: LaxControlFlowTest.testIssue1379 (predicates [] and [1, 2])"""
    fun = lambda pred: vt.cond(pred, lambda x: (True, x), lambda x: (False, x), pred)  # noqa: E731
    for pred in [[], [1, 2]]:
        with pytest.raises(vt.Error, match="predicate has shape"):
            fun(pred)


@pytest.mark.parametrize("cond", COND_IMPLS)
def test_nested_cond(cond):
    """JAX: LaxControlFlowTest.testNestedCond"""
    def fun(x):
        if x < 2:
            return 2 * x
        return 3 * x if x < 5 else 4 * x

    @vt.jit
    def cfun(x):
        return cond(x < 2, lambda x: 2 * x,
                    lambda x: cond(x < 5, lambda x, _: 3 * x, lambda _, y: y * x, x, 4), x)

    for x, want in [(1, 2), (3, 9), (6, 24)]:
        assert int(cfun(x)) == want == fun(x)


def test_cond_type_errors():
    """JAX: LaxControlFlowTest.testCondTypeErrors (predicates that are a function or a string: TypeError)"""
    with pytest.raises(TypeError):
        vt.cond(lambda x: True, lambda top: 2.0, lambda fop: 3.0, 1.0)
    with pytest.raises(TypeError):
        vt.cond("foo", lambda top: 2.0, lambda fop: 3.0, 1.0)


@deliberate("a concrete predicate runs one branch only (the guide: 'A concrete pred runs one branch'), so branches "
            "of different structures or shapes raise only where both run (a traced or batched predicate); a tuple "
            "predicate raises vtape.Error (a ValueError)")
def test_cond_type_errors_branches():
    """JAX: LaxControlFlowTest.testCondTypeErrors (branch structures and shapes differ; a tuple predicate)"""
    with pytest.raises(vt.Error, match="predicate has shape"):
        vt.cond((1.0, 1.0), lambda top: 2.0, lambda fop: 3.0, 1.0)
    # Concrete: only the branch taken runs.
    assert float(vt.cond(True, lambda top: dict(a=2.0), lambda fop: dict(a=(3.0, 3.0)), 1.0)["a"]) == 2.0
    # Traced: both run, and JAX's errors are raised (a TypeError for structures, vtape.Error for shapes).
    with pytest.raises(TypeError, match="structures"):
        vt.jit(lambda p: vt.cond(p, lambda top: dict(a=2.0), lambda fop: dict(a=(3.0, 3.0)), 1.0))(1.0)
    with pytest.raises(vt.Error, match="must agree"):
        vt.jit(lambda p: vt.cond(p, lambda top: np.array([1.0], np.float32), lambda fop: np.float32(1.0), 1.0))(1.0)


def test_cond_one_branch_constant():
    """JAX: LaxControlFlowTest.testCondOneBranchConstant"""
    cfun = vt.jit(lambda x: vt.cond(x < 3, lambda x: 5, lambda x: x, x))
    assert int(cfun(0)) == 5
    assert int(cfun(4)) == 4


@deliberate("branches whose results differ in dtype raise vtape.Error (a ValueError) naming both, where JAX raises "
            "TypeError; as in JAX (with x64), a Python int branch does not take a float operand's dtype")
def test_cond_one_branch_constant_float_operand():
    """JAX: LaxControlFlowTest.testCondOneBranchConstant (x a float: JAX too raises, int64[] against float64[])"""
    cfun = vt.jit(lambda x: vt.cond(x < 3, lambda x: 5, lambda x: x, x))
    with pytest.raises(vt.Error, match="int64.*float64"):
        cfun(0.0)


def test_cond_one_branch_constant_tuple():
    """JAX: LaxControlFlowTest.testCondOneBranchConstantTuple"""
    cfun = vt.jit(lambda x: vt.cond(x < 3, lambda x: (1, 2.0, 3.0), lambda x: (x, 2.0, 4.0), x))
    jtu.assert_all_close(cfun(0), (1, 2.0, 3.0), check_dtypes=False)
    jtu.assert_all_close(cfun(4), (4, 2.0, 4.0), check_dtypes=False)


def test_cond_batched():
    """JAX: LaxControlFlowTest.testCondBatched (values; JAX also inspects the jaxpr for select)"""
    def fun(x, y, z):
        return vt.cond(x < 3, lambda y, _: y, lambda _, z: -z, y, z)

    y, z = np.array([1, 2]), np.array([3, 4])
    jtu.assert_all_close(vt.vmap(fun, (None, 0, 0))(np.array(2), y, z), np.array([1, 2]), check_dtypes=False)
    jtu.assert_all_close(vt.vmap(fun, (None, 0, 0))(np.array(4), y, z), np.array([-3, -4]), check_dtypes=False)
    jfun = vt.jit(fun)
    jtu.assert_all_close(vt.vmap(jfun, (None, 0, 0))(np.array(4), y, z), np.array([-3, -4]), check_dtypes=False)
    jtu.assert_all_close(vt.vmap(jfun, (None, 0, None))(np.array(4), y, np.array(5)), np.array([-5, -5]),
                         check_dtypes=False)
    x = np.array([2, 4])
    jtu.assert_all_close(vt.vmap(jfun, (0, 0, None))(x, y, np.array(5)), np.array([1, -5]), check_dtypes=False)
    jtu.assert_all_close(vt.vmap(jfun)(x, y, z), np.array([1, -4]), check_dtypes=False)


def _cond_jvp_fun_ref(x):
    if x < 3:
        return (x, x)
    y = 2 * x
    return y, 2 * y


def _cond_jvp_fun(x):
    def false_fun(x):
        y = 2 * x
        return y, 2 * y

    return vt.cond(x < 3, lambda x: (x, x), false_fun, x)


@pytest.mark.parametrize("x", [3.14, 2.72])
def test_cond_jvp(x):
    """JAX: LaxControlFlowTest.testCondJVP"""
    ans = vt.jvp(_cond_jvp_fun, (x,), (x,))
    expected = vt.jvp(_cond_jvp_fun_ref, (x,), (x,))
    jtu.assert_all_close(ans, expected, check_dtypes=False)
    jtu.check_grads(_cond_jvp_fun, (x,), order=2, modes=["fwd"])


@pytest.mark.parametrize("cond", COND_IMPLS)
@pytest.mark.parametrize("x", [3.14, 2.72])
def test_cond_jvp2(cond, x):
    """JAX: LaxControlFlowTest.testCondJVP2"""
    fun_ref = lambda x: 2.0 if x < 3 else 2.0 * x  # noqa: E731
    fun = lambda x: cond(x < 3, lambda _: 2.0, lambda x: 2.0 * x, x)  # noqa: E731
    jtu.assert_all_close(vt.jvp(fun, (x,), (x,)), vt.jvp(fun_ref, (x,), (x,)), check_dtypes=False)
    jtu.check_grads(fun, (x,), order=2, modes=["fwd"])


@pytest.mark.parametrize("x", [2.14, 1.72])
def test_cond_grad(x):
    """JAX: LaxControlFlowTest.testCondGrad"""
    f_ref = lambda x: 3.0 * x if x < 2 else vt.sin(x)  # noqa: E731
    f = vt.jit(lambda x: vt.cond(x < 2, lambda x: 3.0 * x, lambda x: vt.sin(x), x))
    jtu.assert_all_close(vt.grad(f)(x), vt.grad(f_ref)(x), check_dtypes=False)
    jtu.check_grads(f, (x,), order=2, modes=["fwd", "rev"])


def test_cond_grad_vmap_nan():
    """JAX: LaxControlFlowTest.testCondGradVmapNan"""
    eps = 1e-3

    def safe1(x):
        return vt.cond(x < eps, lambda _: eps, lambda _: vt.sqrt(x), ())

    out = vt.grad(lambda x: vt.vmap(safe1)(x).sum())(np.zeros(10))
    assert not np.isnan(np.asarray(out)).any()


@pytest.mark.parametrize("cond", COND_IMPLS)
@pytest.mark.parametrize("x0, rtol", [(2.14, None), (1.72, {np.float32: 1e-2, np.float64: 2e-3})])
def test_cond_grad2(cond, x0, rtol):
    """JAX: LaxControlFlowTest.testCondGrad2"""
    def f_ref(x):
        z = np.array([1.0, 2.0]) * x if x[0] < 2 else vt.sin(x)
        return vt.sum(z)

    def _f(x):
        return cond(x[0] < 2, lambda x: np.array([1.0, 2.0]) * x, lambda x: vt.sin(x), x)

    f = lambda x: vt.jit(_f)(x).sum()  # noqa: E731
    x = x0 * np.ones(2)
    jtu.assert_all_close(vt.grad(f)(x), vt.grad(f_ref)(x), check_dtypes=False)
    jtu.check_grads(f, (x,), order=2, modes=["fwd", "rev"], rtol=rtol)


@pytest.mark.parametrize("cond", COND_IMPLS)
@pytest.mark.parametrize("x", [3.14, 2.72])
def test_cond_grad3(cond, x):
    """JAX: LaxControlFlowTest.testCondGrad3"""
    fun_ref = lambda x: 2.0 if x < 3 else 2.0 * x  # noqa: E731
    fun = lambda x: cond(x < 3, lambda _: 2.0, lambda x: 2.0 * x, x)  # noqa: E731
    jtu.assert_all_close(vt.grad(fun)(x), vt.grad(fun_ref)(vt.asarray(x)), check_dtypes=False)
    jtu.check_grads(fun, (x,), order=2, modes=["fwd", "rev"])


@pytest.mark.parametrize("cond", COND_IMPLS)
@pytest.mark.parametrize("x", [3.14, 2.72])
def test_cond_grad4(cond, x):
    """JAX: LaxControlFlowTest.testCondGrad4 (the true branch closes over y)"""
    def fun_ref(x, y):
        return 2.0 * vt.sin(y) if x < 3 else 2.0 * vt.cos(x)

    @vt.jit
    def fun(x, y):
        return cond(x < 3, lambda _: 2.0 * vt.sin(y), lambda x: 2.0 * x, x)

    y = 5.8
    jtu.assert_all_close(vt.grad(fun, 1)(x, y), vt.grad(fun_ref, 1)(x, y), check_dtypes=False)
    jtu.check_grads(fun, (x, y), order=2, modes=["fwd", "rev"])


def test_cond_linearize():
    """JAX: LaxControlFlowTest.testCondLinearize (f_lin(t) as jvp)"""
    f = lambda x: vt.cond(x < 2, lambda x: 3.0 * x, lambda x: vt.sin(x), x)  # noqa: E731
    y, t = vt.jvp(f, (1.0,), (2.0,))
    jtu.assert_all_close(y, 3.0, check_dtypes=False)
    jtu.assert_all_close(t, 6.0, check_dtypes=False)
    y, t = vt.jvp(f, (4.0,), (2.0,))
    jtu.assert_all_close(y, np.sin(4.0), check_dtypes=False)
    jtu.assert_all_close(t, np.cos(4.0) * 2.0, check_dtypes=False)


@pytest.mark.parametrize("cond", COND_IMPLS)
def test_cond_linearize2(cond):
    """JAX: LaxControlFlowTest.testCondLinearize2 (f_lin(x) as jvp along x)"""
    def f_ref(x):
        z = np.array([1.0, 2.0]) * x if x[0] < 2 else vt.cos(vt.sin(x))
        return vt.sum(z)

    def f(x):
        return cond(x[0] < 2, lambda x: np.array([1.0, 2.0]) * x, lambda x: vt.cos(vt.sin(x)), x).sum()

    for fun, x in [(f, 2.14 * np.ones(2)), (f, -2.14 * np.ones(2)), (vt.jit(f), 2.14 * np.ones(2))]:
        y, t = vt.jvp(fun, (x,), (x,))
        y_ref, t_ref = vt.jvp(f_ref, (x,), (x,))
        jtu.assert_all_close(y, y_ref, check_dtypes=False)
        jtu.assert_all_close(t, t_ref, check_dtypes=False)


def test_cond_jit():
    """JAX: LaxControlFlowTest.testCondJit"""
    f = lambda x: vt.cond(x < 2, lambda x: 3.0 * x, lambda x: vt.sin(x), x)  # noqa: E731
    jtu.assert_all_close(vt.jit(f)(1.0), f(1.0), check_dtypes=False)
    jtu.assert_all_close(vt.jit(f)(4.0), f(4.0), check_dtypes=False)


@pytest.mark.parametrize("cond", COND_IMPLS)
@pytest.mark.parametrize("jit", [False, True], ids=["testCondWithConsts", "testCondJitWithConsts"])
def test_cond_with_consts(cond, jit):
    """JAX: LaxControlFlowTest.testCondWithConsts, testCondJitWithConsts"""
    def f(x):
        return cond(x < 2, lambda x: np.array([1.0, 2.0]) * x, lambda x: np.array([3.0, 4.0]) * vt.sin(x), x)

    def f_ref(x):
        return np.array([1.0, 2.0]) * x if x < 2 else np.array([3.0, 4.0]) * np.sin(x)

    fun = vt.jit(f) if jit else f
    jtu.assert_all_close(fun(1.0), f_ref(1.0), check_dtypes=False)
    jtu.assert_all_close(fun(4.0), f_ref(4.0), check_dtypes=False)


@pytest.mark.parametrize("cond", COND_IMPLS)
def test_cond_vmap_grad(cond):
    """JAX: LaxControlFlowTest.testCondVmapGrad"""
    f_1 = lambda x: x**2  # noqa: E731
    f_2 = lambda x: x**3  # noqa: E731
    f = lambda x: cond(x > 0, f_1, f_2, x)  # noqa: E731
    g = lambda x: vt.where(x > 0, f_1(x), f_2(x))  # noqa: E731
    x = np.linspace(-1, 1, 20)
    jtu.assert_all_close(vt.vmap(vt.grad(f))(x), vt.vmap(vt.grad(g))(x), check_dtypes=False)


def test_issue514():
    """JAX: LaxControlFlowTest.testIssue514"""
    out = vt.cond(True, lambda x, _: (x[0], 0), lambda _, x: x, (0, 0), (1, 1))
    jtu.assert_all_close(out, (0, 0), check_dtypes=False)


def test_issue649():
    """JAX: LaxControlFlowTest.testIssue649 (float carries)"""
    out = vt.while_loop(lambda x: x[1] < 10, lambda x: (7.0 + 0.0 * x[0], x[1] + 1), (33.0, 4.0))
    jtu.assert_all_close(out, (7.0, 10.0))


def test_cond_casting():
    """JAX: LaxControlFlowTest.test_cond_casting"""
    identity = lambda x: x  # noqa: E731
    y = vt.cond(True, identity, identity, 1.0)
    assert isinstance(y, vt.Tensor)
    assert float(y) == 1.0


def test_cond_ad_batched_unit():
    """JAX: LaxControlFlowTest.test_cond_ad_batched_unit"""
    cond_id = lambda x: vt.cond(x < 0.0, lambda x: x, lambda x: x, x)  # noqa: E731
    out = vt.vmap(vt.jacrev(lambda x: cond_id(cond_id(x))))(np.ones(1))
    jtu.assert_all_close(out, np.ones(1))


def test_cond_basic_vjp3():
    """JAX: LaxControlFlowTest.test_cond_basic_vjp3"""
    _, f_vjp = vt.vjp(lambda x: vt.cond(True, vt.sin, lambda x: x, x), 1.0)
    (g,) = f_vjp(1.0)
    jtu.assert_all_close(g, np.cos(1.0), check_dtypes=False)
    _, h_vjp = vt.vjp(lambda x: vt.cond(True, vt.sin, lambda x: 1.0, x), 1.0)
    (g,) = h_vjp(1.0)
    jtu.assert_all_close(g, np.cos(1.0), check_dtypes=False)


def test_cond_vmap_forwarding_doesnt_promote():
    """JAX: LaxControlFlowTest.test_cond_vmap_forwarding_doesnt_promote"""
    def f(x, y):
        return vt.cond(x < 3, lambda x, y: (x * 2, y), lambda x, y: (x * 3, y), x, y)

    x2, y2 = vt.vmap(f, in_axes=(0, None), out_axes=(0, None))(np.arange(3.0), np.array(3.0))
    assert float(y2) == 3.0


# --- scan -------------------------------------------------------------------------------------------------------


def _scan_f_cos(d):
    def f(c, a):
        assert a.shape == (3,)
        assert c.shape == (4,)
        b = vt.cos(vt.sum(vt.sin(a)) + vt.sum(vt.cos(c)) + vt.sum(d))
        c = vt.sin(c * b)
        assert b.shape == ()
        return c, b

    return f


def _maybe_jit(scan, f, jit_scan, jit_f):
    if jit_f:
        f = vt.jit(f)
    if jit_scan:
        run = lambda c, as_: vt.jit(lambda c, as_: scan(f, c, as_))(c, as_)  # noqa: E731
    else:
        run = lambda c, as_: scan(f, c, as_)  # noqa: E731
    return f, run


JITS = [pytest.param(js, jf, id=f"jit_scan={js}-jit_f={jf}") for js in [False, True] for jf in [False, True]]


@pytest.mark.parametrize("jit_scan, jit_f", JITS)
@pytest.mark.parametrize("scan", SCAN_IMPLS + [SCAN_IMPL_UNROLL])
def test_scan_impl(jit_scan, jit_f, scan):
    """JAX: LaxControlFlowTest.testScanImpl"""
    rng = np.random.RandomState(0)
    f, run = _maybe_jit(scan, _scan_f_cos(rng.randn(2)), jit_scan, jit_f)
    as_ = rng.randn(5, 3)
    c = rng.randn(4)
    ans = run(c, as_)
    expected = scan_reference(f, c, as_)
    jtu.assert_all_close(ans, expected, check_dtypes=False, rtol={np.float64: 1.4e-15}, atol={np.float64: 8e-15})


@pytest.mark.parametrize("jit_scan, jit_f", JITS)
@pytest.mark.parametrize("scan", SCAN_IMPLS)
def test_scan_jvp(jit_scan, jit_f, scan):
    """JAX: LaxControlFlowTest.testScanJVP"""
    rng = np.random.RandomState(0)
    f, run = _maybe_jit(scan, _scan_f_cos(rng.randn(2)), jit_scan, jit_f)
    as_ = rng.randn(5, 3)
    c = rng.randn(4)
    ans = vt.jvp(lambda c, as_: run(c, as_), (c, as_), (c, as_))
    expected = vt.jvp(lambda c, as_: scan_reference(f, c, as_), (c, as_), (c, as_))
    tol = {np.float64: 1e-12, np.float32: 1e-4}
    jtu.assert_all_close(ans, expected, check_dtypes=False, rtol=tol, atol=tol)
    jtu.check_grads(run, (c, as_), order=2, modes=["fwd"], rtol={np.float32: 2e-1})


@pytest.mark.parametrize("jit_scan, jit_f", JITS)
@pytest.mark.parametrize("scan", SCAN_IMPLS)
def test_scan_grad(jit_scan, jit_f, scan):
    """JAX: LaxControlFlowTest.testScanGrad"""
    rng = np.random.RandomState(0)
    d = rng.randn(2)

    def f(c, a):
        assert a.shape == (3,)
        assert c.shape == (4,)
        b = vt.sum(vt.sin(a)) + vt.sum(vt.sin(c)) + vt.sum(vt.sin(d))
        c = vt.sin(c * b)
        assert b.shape == ()
        return c, b

    if scan is _scan_checkpointed:
        rtol = {np.float32: 5e-5, np.float64: 1e-13}
        atol = 1e-5
    else:
        rtol = {np.float32: 2e-4, np.float64: 1e-13}
        atol = {np.float32: 8e-5, np.float64: 1e-13}
    f, run = _maybe_jit(scan, f, jit_scan, jit_f)
    as_ = rng.randn(5, 3)
    c = rng.randn(4)
    ans = vt.grad(lambda c, as_: list(run(c, as_))[0].sum())(c, as_)
    expected = vt.grad(lambda c, as_: list(scan_reference(f, c, as_))[0].sum())(c, as_)
    jtu.assert_all_close(ans, expected, check_dtypes=False, rtol=rtol, atol=atol)
    jtu.check_grads(run, (c, as_), order=2, modes=["rev"], atol=1e-3, rtol=5e-1)


def test_scan_rnn():
    """JAX: LaxControlFlowTest.testScanRnn"""
    r = np.random.RandomState(0)
    n_in, n_hid, n_out, length = 4, 2, 1, 3
    W_trans = r.randn(n_hid, n_hid + n_in)
    W_out = r.randn(n_out, n_hid + n_in)
    params = W_trans, W_out
    inputs = r.randn(length, n_in)
    targets = r.randn(length, n_out)

    def step(params, state, input):
        W_trans, W_out = params
        stacked = vt.concatenate([state, input])
        output = vt.tanh(W_out @ stacked)
        next_state = vt.tanh(W_trans @ stacked)
        return next_state, output

    def rnn(params, inputs):
        _, outputs = vt.scan(partial(step, params), vt.zeros((n_hid,)), inputs)
        return outputs

    @vt.jit
    def loss(params, inputs, targets):
        predictions = rnn(params, inputs)
        return vt.sum((predictions - targets) ** 2)

    loss(params, inputs, targets)
    vt.jvp(lambda params: loss(params, inputs, targets), (params,), (params,))
    jtu.check_grads(loss, (params, inputs, targets), order=2, modes=["fwd"], rtol={np.float32: 2e-2, np.float64: 1e-6})
    vt.grad(loss)(params, inputs, targets)
    jtu.check_grads(loss, (params, inputs, targets), order=2, rtol=2e-2)

    batched_inputs = r.randn(7, length, n_in)
    batched_targets = r.randn(7, length, n_out)
    losses = vt.vmap(lambda x, y: loss(params, x, y))(batched_inputs, batched_targets)
    expected = np.stack([float(loss(params, x, y)) for x, y in zip(batched_inputs, batched_targets)])
    jtu.assert_all_close(losses, expected, check_dtypes=False, rtol=1e-2)


@pytest.mark.parametrize("scan", SCAN_IMPLS)
def test_issue711(scan):
    """JAX: LaxControlFlowTest.testIssue711 (a grad inside the body; the counter a float; JAX asserts no crash, here
    also the closed form: x_final = x0 - 7.5 p)"""
    def minimize_structure(test_params):
        energy_fn = lambda conf: vt.sum(conf * test_params)  # noqa: E731

        def apply_carry(carry, _):
            i, x = carry
            new_x = x - 0.1 * vt.grad(energy_fn)(x)
            return (i + 1, new_x), _

        x0 = np.array([1.0, 2.0, 3.0])
        (_, x_final), _ = scan(apply_carry, (0.0, x0), np.zeros((75, 0)))
        return x_final

    jtu.assert_all_close(minimize_structure(0.5), np.array([1.0, 2.0, 3.0]) - 7.5 * 0.5, rtol=1e-13)
    loss = lambda p: vt.sum(vt.sin(1.0 - minimize_structure(p)))  # noqa: E731
    g = vt.grad(loss)(0.25)
    jtu.assert_all_close(g, np.sum(np.cos(1.0 - np.array([1.0, 2.0, 3.0]) + 7.5 * 0.25) * 7.5), rtol=1e-12)


def test_issue744():
    """JAX: LaxControlFlowTest.testIssue744 (xs of scalars have no leading axis: ValueError. vtape takes the namedtuple
    carry as one leaf, an array of its fields, which does not change the error)"""
    import collections

    Point = collections.namedtuple("Point", ["x", "y"])
    p0 = Point(x=np.array(1.0), y=np.array(2.0))
    with pytest.raises(ValueError, match="leading axis"):
        vt.scan(lambda p, i: (Point(p.x + 1, p.y + 1), i), p0, list(range(5)))


def test_scan_body_output_error():
    """JAX: LaxControlFlowTest.testScanBodyOutputError"""
    with pytest.raises(TypeError, match="pair"):
        vt.scan(lambda c, x: np.float32(0.0), 0.0, np.arange(5.0))


def test_scan_metadata_error():
    """JAX: LaxControlFlowTest.testScanMetadataError"""
    with pytest.raises(TypeError, match="'T'"):
        vt.fori_loop(0, 1, lambda i, x: {"T": np.array([0.5])}, {"t": np.array([1.0])})


@pytest.mark.parametrize("body, init, xs", [
    pytest.param(lambda c, x: ((0.0, 0.0, 0.0), x), (1.0, (2.0, 3.0)), np.arange(5.0), id="tuple-length"),
    pytest.param(lambda x, _: ((x[0],), None), (np.array(0.0),) * 2, None, id="tuple-shorter"),
    pytest.param(lambda x, _: ([x[0]] * 2, None), (np.array(0.0),) * 2, None, id="tuple-to-list"),
    pytest.param(lambda x, _: ({"a": x["a"], "b": x["a"]}, None), {"a": np.array(0.0)}, None, id="dict-children"),
    pytest.param(lambda x, _: (({"a": x[0]["a"], "b": x[0]["a"]},) * 2, None), ({"a": np.array(0.0)},) * 2, None,
                 id="nested-dict"),
])
def test_scan_body_carry_pytree_mismatch_errors(body, init, xs):
    """JAX: LaxControlFlowTest.testScanBodyCarryPytreeMismatchErrors (float carries)"""
    with pytest.raises(TypeError, match="structure"):
        vt.scan(body, init, xs, length=None if xs is not None else 1)


@pytest.mark.parametrize("body, init", [
    pytest.param(lambda x, _: (vt.astype(x, "float32"), None), np.int32(0), id="carry"),
    pytest.param(lambda x, _: ((x[0], vt.astype(x[1], "float32")), None), (np.int32(0),) * 2, id="component"),
    pytest.param(lambda x, _: ((vt.astype(x[0], "float32"), vt.reshape(vt.astype(x[1], "float32"), (1, 1)), x[2]),
                               None), (np.int32(0),) * 3, id="several"),
])
def test_scan_body_carry_type_mismatch_errors(body, init):
    """JAX: LaxControlFlowTest.testScanBodyCarryTypeMismatchErrors"""
    with pytest.raises(TypeError, match="carry .* as float32 where init's is int32"):
        vt.scan(body, vt.tree_map(np.asarray, init), None, length=1)


def test_scan_length_error():
    """JAX: LaxControlFlowTest.testScanLengthError"""
    with pytest.raises(ValueError, match="5"):
        vt.scan(lambda *args: args, 0.0, np.arange(10.0), length=5)


@pytest.mark.parametrize("scan", SCAN_IMPLS)
def test_scan_higher_order_differentiation(scan):
    """JAX: LaxControlFlowTest.testScanHigherOrderDifferentiation"""
    d = 0.75

    def f(c, a):
        b = vt.sin(c * vt.sum(vt.cos(d * a)))
        c = 0.9 * vt.cos(d * vt.sum(vt.sin(c * a)))
        return c, b

    as_ = np.arange(6.0).reshape((3, 2))
    c = np.array(1, dtype=as_.dtype)
    jtu.check_grads(lambda c, as_: scan(f, c, as_), (c, as_), modes=["rev"], order=2, rtol={np.float32: 6e-3})


IN_AXES = [ax for ax in [(a, b) for a in [None, 0, 1] for b in [None, 0, 1, 2]] if ax != (None, None)]


@pytest.mark.parametrize("jit_scan, jit_f", [(False, False), (True, True)], ids=["eager", "jit_scan-jit_f"])
@pytest.mark.parametrize("in_axes", IN_AXES, ids=str)
def test_scan_vmap(jit_scan, jit_f, in_axes):
    """JAX: LaxControlFlowTest.testScanVmap"""
    rng = np.random.RandomState(0)
    f, run = _maybe_jit(vt.scan, _scan_f_cos(rng.randn(2)), jit_scan, jit_f)
    as_shape, c_shape = [5, 3], [4]
    c_bdim, as_bdim = in_axes
    if c_bdim is not None:
        c_shape.insert(c_bdim, 7)
    if as_bdim is not None:
        as_shape.insert(as_bdim, 7)
    as_ = rng.randn(*as_shape)
    c = rng.randn(*c_shape)
    ans = vt.vmap(lambda c, as_: run(c, as_), in_axes)(c, as_)
    expected = vt.vmap(lambda c, as_: scan_reference(f, c, as_), in_axes)(c, as_)
    jtu.assert_all_close(ans, expected, check_dtypes=False, rtol=1e-5, atol=1e-5)


def test_scan_vmap_tuples():
    """JAX: LaxControlFlowTest.testScanVmapTuples"""
    def f(c, a):
        a1, a2 = a
        c1, c2 = c
        b = vt.sum(vt.cos(a1)) * vt.sum(c2 * a2)
        c = c1 * vt.sin(vt.sum(a1 * a2)), c2 * vt.cos(vt.sum(a1))
        return c, b

    in_axes = (0, (1, 2))
    r = np.random.RandomState(0)
    as_ = (r.randn(3, 7), r.randn(3, 4, 7))
    c = (r.randn(7, 2), r.randn(7))
    expected_c_out, expected_bs = [], []
    for i in range(7):
        c_out, bs = vt.scan(f, (c[0][i], c[1][i]), (as_[0][:, i], as_[1][:, :, i]))
        expected_c_out.append(c_out)
        expected_bs.append(bs)
    expected_c_out = (vt.stack([c[0] for c in expected_c_out]), vt.stack([c[1] for c in expected_c_out]))
    expected = expected_c_out, vt.stack(expected_bs)
    ans = vt.vmap(lambda c, as_: vt.scan(f, c, as_), in_axes)(c, as_)
    jtu.assert_all_close(ans, expected, check_dtypes=False)


@pytest.mark.parametrize("scan", SCAN_IMPLS)
def test_scan_vmap_fixpoint(scan):
    """JAX: LaxControlFlowTest.testScanVmapFixpoint"""
    def f(carry_init):
        def scan_body(c, x):
            return ((c[1], c[2], c[3], 0.0), None)

        return scan(scan_body, (0.0, 1.0, 2.0, carry_init), np.zeros(2))

    carry_init = np.array([3.0, 4.0, 5.0])
    carry_out, _ = vt.vmap(f)(carry_init)
    jtu.assert_all_close(carry_out[3], np.array([0.0, 0.0, 0.0]), check_dtypes=False)
    jtu.assert_all_close(carry_out[2], np.array([0.0, 0.0, 0.0]), check_dtypes=False)
    jtu.assert_all_close(carry_out[1], carry_init, check_dtypes=False)
    jtu.assert_all_close(carry_out[0], np.array([2.0, 2.0, 2.0]), check_dtypes=False)


def _issue757_loop(xs):
    def loop(val):
        def apply_carry(x, i):
            return vt.grad(vt.cos, argnums=(0,))(x)[0], i

        final_val, _ = vt.scan(apply_carry, val, xs)
        return final_val

    return loop


def test_issue757():
    """JAX: LaxControlFlowTest.testIssue757 (xs arange(10.) as floats; JAX asserts no crash, here the chain rule)"""
    out = vt.jit(vt.jacfwd(_issue757_loop(np.arange(10.0)), argnums=(0,)))(0.5)
    x, want = 0.5, 1.0
    for _ in range(10):  # x -> -sin(x): the derivative multiplies by -cos(x)
        want *= -np.cos(x)
        x = -np.sin(x)
    jtu.assert_all_close(out[0], want, check_dtypes=False, rtol=1e-13)


def test_issue757_int_xs():
    """JAX: LaxControlFlowTest.testIssue757 (xs = jnp.arange(iterations), integers)"""
    vt.jit(vt.jacfwd(_issue757_loop(np.arange(10)), argnums=(0,)))(0.5)


def test_map():
    """JAX: LaxControlFlowTest.testMap"""
    xs = np.arange(10.0)
    jtu.assert_all_close(vt.lax.map(lambda x: x**2, xs), xs**2)


def test_map_empty():
    """JAX: LaxControlFlowTest.testMapEmpty"""
    jtu.assert_all_close(vt.lax.map(lambda x: x * x, np.array([])), np.array([]))


@deliberate("an eager loop traces its body on every call (no cache across calls); the plan of a jitted function "
            "that holds the loop runs without calling Python again")
def test_caching():
    """JAX: LaxControlFlowTest.testCaching (JAX caches the loop's trace across calls)"""
    calls = []

    def cond(x):
        calls.append("cond")
        return x < 5

    def body(x):
        calls.append("body")
        return x + 2

    f = vt.jit(lambda x: vt.while_loop(cond, body, x))
    assert float(f(0.0)) == 6.0
    traced = len(calls)
    assert traced > 0
    assert float(f(1.0)) == 5.0
    assert len(calls) == traced  # the plan ran, Python did not
    vt.while_loop(cond, body, 0.0)
    assert len(calls) > traced  # eager: traced again


def test_while_cond_constant():
    """JAX: LaxControlFlowTest.testWhileCondConstant"""
    out = vt.while_loop(lambda _: False, lambda _: (), ())
    assert out == ()


JIT_LOOP = [pytest.param(jl, jb, jc, id=f"jit_loop={jl}-jit_body={jb}-jit_cond={jc}")
            for jl in [False, True] for jb in [False, True] for jc in [False, True]]


@pytest.mark.parametrize("jit_loop, jit_body, jit_cond", JIT_LOOP)
def test_while_jvp(jit_loop, jit_body, jit_cond):
    """JAX: LaxControlFlowTest.testWhileJVP"""
    cond = lambda x: le(x[0, 2], 8)  # noqa: E731
    body = lambda x: x * x  # noqa: E731
    if jit_cond:
        cond = vt.jit(cond)
    if jit_body:
        body = vt.jit(body)
    loop = partial(vt.while_loop, cond, body)
    if jit_loop:
        loop = vt.jit(loop)
    loop_ref = partial(while_loop_reference, cond, body)
    x = np.arange(9.0).reshape((3, 3))
    jtu.assert_all_close(vt.jvp(loop, (x,), (x,)), vt.jvp(loop_ref, (x,), (x,)), check_dtypes=False)
    jtu.check_grads(loop, (x,), order=2, modes=["fwd"])


def test_le_operator():
    """JAX: LaxControlFlowTest.testWhileJVP (its cond, x[0, 2] <= 8, written with <=)"""
    x = np.arange(9.0).reshape((3, 3))
    out = vt.while_loop(lambda x: x[0, 2] <= 8, lambda x: x * x, x)
    jtu.assert_all_close(out, x**4)
    assert float(vt.asarray(3.0) >= 2) == 1.0


def test_while_jvp_via_fori_loop():
    """JAX: LaxControlFlowTest.testWhileJVPViaForiLoop"""
    f = lambda x: vt.fori_loop(0, 3, lambda i, x: x * 2, x)  # noqa: E731
    jtu.assert_all_close(f(2.0), 16.0, check_dtypes=False)
    jtu.assert_all_close(vt.jvp(f, (2.0,), (1.0,)), (16.0, 8.0), check_dtypes=False)
    jtu.check_grads(f, (2.0,), order=2, modes=["fwd"])
    f = lambda x: vt.fori_loop(0, 3, lambda i, x: x * (i + 1), x)  # noqa: E731
    jtu.assert_all_close(f(2.0), 12.0, check_dtypes=False)
    jtu.assert_all_close(vt.jvp(f, (2.0,), (1.0,)), (12.0, 6.0), check_dtypes=False)
    jtu.check_grads(f, (2.0,), order=2, modes=["fwd"])


def test_while_jvp_with_growing_nonzero_tangents():
    """JAX: LaxControlFlowTest.testWhileJVPWithGrowingNonzeroTangents (float counter)"""
    rng = np.random.RandomState(0)

    def cond(state):
        i, x, y, z = state
        return i < 2

    def body(state):
        i, x, y, z = state
        y = x * x
        z = y * y
        return i + 1, x, y, z

    y, z = rng.randn(2), rng.randn(2)

    def loop(loop_impl, x):
        return loop_impl(cond, body, (0.0, x, y, z))[1]

    loop_lax = partial(loop, vt.while_loop)
    loop_ref = partial(loop, while_loop_reference)
    x = rng.randn(2)
    jtu.assert_all_close(vt.jvp(loop_lax, (x,), (x,)), vt.jvp(loop_ref, (x,), (x,)), check_dtypes=False)
    jtu.check_grads(loop_lax, (x,), order=2, modes=["fwd"])


def test_static_fori_grad():
    """JAX: LaxControlFlowTest.testStaticForiGrad"""
    func = lambda x: vt.fori_loop(x, x + 2.0, lambda i, c: c, x)  # noqa: E731
    vt.grad(func)(1.0)


@deliberate("while_loop is forward only, as in JAX: reverse mode raises vtape.Error (a ValueError) that says to use "
            "fori_loop or scan; its jvp (JAX's linearize) works")
def test_while_grad_error():
    """JAX: LaxControlFlowTest.testWhileGradError (loop='while')"""
    func = lambda x: vt.while_loop(lambda i: i < 5.0, lambda i: i + 1.0, x)  # noqa: E731
    with pytest.raises(ValueError, match="while_loop.*fori_loop or scan"):
        vt.grad(func)(1.0)
    y, t = vt.jvp(func, (1.0,), (1.0,))
    assert float(y) == 5.0 and float(t) == 1.0


def test_while_grad_error_traced_fori():
    """JAX: LaxControlFlowTest.testWhileGradError (fori_inside_scan: a fori_loop with traced bounds is a while_loop)"""
    func = lambda x: vt.scan(lambda c, x: (vt.fori_loop(x, x + 2.0, lambda i, c1: c1 * c, x), None),  # noqa: E731
                             x, np.ones(2))[0]
    with pytest.raises(ValueError, match="while_loop"):
        vt.grad(func)(1.0)


@pytest.mark.deliberate("cond with a concrete predicate runs its branch as plain Python, where JAX traces it: the "
                        "fori_loop's bounds are then known, the loop is a scan, and its gradient exists where JAX's "
                        "while_loop raises")
def test_while_grad_error_traced_fori_inside_cond():
    """JAX: LaxControlFlowTest.testWhileGradError (fori_inside_cond)"""
    func = lambda x: vt.cond(True, lambda x, _: vt.fori_loop(x, x + 2.0, lambda i, c: c * 2.0, x),  # noqa: E731
                             lambda _, x: x, x, 1.0)
    assert float(vt.grad(func)(1.0)) == 4.0


def test_issue1361():
    """JAX: LaxControlFlowTest.testIssue1361 (xs arange(3.); JAX asserts no crash, here d(8x)/dx = 8)"""
    @vt.jit
    def jit_run_scan(x):
        def fun(carry, _):
            x, _ = carry
            return (2 * x, 0.0), None

        (x, _), _ = vt.scan(fun, (x, 0.0), np.arange(3.0))
        return x

    jtu.assert_all_close(vt.grad(lambda x: jit_run_scan(x))(0.0), 8.0, check_dtypes=False)


def test_scan_length_arg():
    """JAX: LaxControlFlowTest.testScanLengthArg (a float carry)"""
    arange = lambda n: vt.scan(lambda c, _: (c + 1, c), 0.0, None, length=n)[1]  # noqa: E731
    jtu.assert_all_close(arange(10), np.arange(10), check_dtypes=False)


def test_scan_length_arg_int():
    """JAX: LaxControlFlowTest.testScanLengthArg (its integer carry as written)"""
    ys = vt.scan(lambda c, _: (c + 1, c), 0, None, length=10)[1]
    jtu.assert_all_close(ys, np.arange(10))


@pytest.mark.parametrize("scan", SCAN_IMPLS)
def test_scan_reverse(scan):
    """JAX: LaxControlFlowTest.test_scan_reverse (float values)"""
    def cumsum(x, reverse):
        return scan(lambda c, x: (c + x, c + x), 0.0, x, reverse=reverse)[1]

    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0])
    jtu.assert_all_close(np.cumsum(x), cumsum(x, False), check_dtypes=False)
    jtu.assert_all_close(np.cumsum(x[::-1])[::-1], cumsum(x, True), check_dtypes=False)


def test_scan_xs_none():
    """JAX: LaxControlFlowTest.test_scan_xs_none (a float carry)"""
    h, _ = vt.scan(lambda h, _: (h + 1, None), 0.0, length=20)
    assert float(h) == 20


def test_disable_jit_while_loop_with_mutation():
    """JAX: LaxControlFlowTest.test_disable_jit_while_loop_with_mutation (eager against jit; y = 1 + 2 + ... + 10)"""
    def body_fun(carry):
        x, y = carry
        x += 1
        return x, y + x

    def f():
        val = np.array(1.0)
        return vt.while_loop(lambda c: c[0] < 10, body_fun, (val, val))[1]

    assert float(f()) == float(vt.jit(f)()) == 55.0


def test_while_loop_fixed_point_with_batched_pred_and_consts():
    """JAX: LaxControlFlowTest.test_while_loop_fixed_point_with_batched_pred_and_consts (float counter; JAX asserts
    no crash, here z = 1 + (5 - i) x)"""
    def f(i, x):
        def body(carry):
            i, z = carry
            return i + 1, z + x

        return vt.while_loop(lambda c: c[0] < 5, body, (i, vt.ones((3,))))[1]

    out = vt.vmap(f, in_axes=(0, 1))(np.arange(4.0), np.ones((3, 4)))
    jtu.assert_all_close(out, 1.0 + (5.0 - np.arange(4.0))[:, None] * np.ones((4, 3)))


@pytest.mark.parametrize("scan", SCAN_IMPLS)
def test_scan_hoisting_consts(scan):
    """JAX: LaxControlFlowTest.test_scan_hoisting_consts (JAX asserts no crash; f is linear in x, so its gradient is
    f(1))"""
    A = np.arange(4.0).reshape(2, 2)
    B = np.arange(4.0).reshape(2, 2) + 1.0

    def f(x):
        def body(c, _):
            c1, c2, c3 = c
            return (A @ c1, B @ c2, vt.sin(B) @ c3), None

        init_carry = (x * vt.ones((2,)), x * vt.ones((2,)), x * vt.ones((2,)))
        (c1, c2, c3), _ = scan(body, init_carry, None, length=3)
        return vt.sum(c1) + vt.sum(c2) + vt.sum(c3)

    m = np.linalg.matrix_power
    want = sum(np.sum(m(M, 3) @ np.ones(2)) for M in (A, B, np.sin(B)))
    jtu.assert_all_close(vt.grad(f)(1.0), want, check_dtypes=False, rtol=1e-14)


def test_scan_fixpoint_instantiate():
    """JAX: LaxControlFlowTest.test_scan_fixpoint_instantiate (JAX asserts no crash; the carry is constant after one
    step, so the gradient is 0)"""
    def f(x):
        c, () = vt.scan(lambda c, _: ((0.0, 0.0), ()), (x, 0.0), (), length=5)
        return sum(c)

    jtu.assert_all_close(vt.grad(f)(1.0), 0.0, check_dtypes=False)


# --- compositions: JAX's loop bodies under vmap, grad, jit and each other ----------------------------------------


def _rnn_setup():
    r = np.random.RandomState(0)
    n_in, n_hid, n_out, length = 4, 2, 1, 3
    params = (r.randn(n_hid, n_hid + n_in), r.randn(n_out, n_hid + n_in))

    def loss(params, inputs, targets):
        W_trans, W_out = params

        def step(state, input):
            stacked = vt.concatenate([state, input])
            return vt.tanh(W_trans @ stacked), vt.tanh(W_out @ stacked)

        _, predictions = vt.scan(step, vt.zeros((n_hid,)), inputs)
        return vt.sum((predictions - targets) ** 2)

    return params, loss, r.randn(7, length, n_in), r.randn(7, length, n_out)


@pytest.mark.parametrize("jit", [False, True])
def test_scan_rnn_per_example_grads(jit):
    """JAX: LaxControlFlowTest.testScanRnn (its batched loss, differentiated: vmap(grad) against a loop of grads)"""
    params, loss, inputs, targets = _rnn_setup()
    per_example = vt.vmap(vt.grad(loss), in_axes=(None, 0, 0))
    if jit:
        per_example = vt.jit(per_example)
    ans = per_example(params, inputs, targets)
    for i in range(inputs.shape[0]):
        want = vt.grad(loss)(params, inputs[i], targets[i])
        jtu.assert_all_close(tuple(np.asarray(a)[i] for a in ans), want, rtol=1e-12, atol=1e-14)


def test_scan_rnn_grad_of_vmap():
    """JAX: LaxControlFlowTest.testScanRnn (the batched loss summed, by check_grads at order 2 in both modes)"""
    params, loss, inputs, targets = _rnn_setup()
    batched = lambda params, inputs: vt.sum(vt.vmap(loss, in_axes=(None, 0, 0))(params, inputs, targets))  # noqa: E731
    jtu.check_grads(batched, (params, inputs), order=2, rtol=2e-2)


@pytest.mark.parametrize("scan", SCAN_IMPLS)
def test_scan_jvp_rev(scan):
    """JAX: LaxControlFlowTest.testScanJVP (its check_grads, in reverse mode too)"""
    rng = np.random.RandomState(0)
    f = _scan_f_cos(rng.randn(2))
    as_, c = rng.randn(5, 3), rng.randn(4)
    jtu.check_grads(lambda c, as_: scan(f, c, as_), (c, as_), order=2, modes=["rev"], rtol={np.float32: 2e-1})


@pytest.mark.parametrize("scan", SCAN_IMPLS)
def test_scan_grad_fwd(scan):
    """JAX: LaxControlFlowTest.testScanGrad (its check_grads, in forward mode too)"""
    rng = np.random.RandomState(0)
    d = rng.randn(2)

    def f(c, a):
        b = vt.sum(vt.sin(a)) + vt.sum(vt.sin(c)) + vt.sum(vt.sin(d))
        return vt.sin(c * b), b

    as_, c = rng.randn(5, 3), rng.randn(4)
    jtu.check_grads(lambda c, as_: scan(f, c, as_), (c, as_), order=2, modes=["fwd"], atol=1e-3, rtol=5e-1)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)], ids=str)
def test_scan_vmap_grad(in_axes):
    """JAX: LaxControlFlowTest.testScanVmap and testScanGrad: the gradient of the scan, per example, against the
    reference loop's"""
    rng = np.random.RandomState(0)
    f = _scan_f_cos(rng.randn(2))
    c = rng.randn(*((7, 4) if in_axes[0] == 0 else (4,)))
    as_ = rng.randn(*((7, 5, 3) if in_axes[1] == 0 else (5, 3)))
    loss = lambda scan: lambda c, as_: vt.sum(scan(f, c, as_)[1]) + vt.sum(scan(f, c, as_)[0])  # noqa: E731
    ans = vt.vmap(vt.grad(loss(vt.scan), argnums=(0, 1)), in_axes)(c, as_)
    expected = vt.vmap(vt.grad(loss(scan_reference), argnums=(0, 1)), in_axes)(c, as_)
    jtu.assert_all_close(ans, expected, check_dtypes=False, rtol=1e-12, atol=1e-13)


def test_scan_nested_vmap():
    """JAX: LaxControlFlowTest.testScanVmap (two levels of vmap)"""
    rng = np.random.RandomState(0)
    f = _scan_f_cos(rng.randn(2))
    c, as_ = rng.randn(2, 4), rng.randn(3, 5, 3)
    ans = vt.vmap(vt.vmap(lambda c, as_: vt.scan(f, c, as_), (None, 0)), (0, None))(c, as_)
    expected = vt.vmap(vt.vmap(lambda c, as_: scan_reference(f, c, as_), (None, 0)), (0, None))(c, as_)
    jtu.assert_all_close(ans, expected, check_dtypes=False, rtol=1e-13, atol=1e-14)
    for i in range(2):
        for j in range(3):
            carry, ys = vt.scan(f, c[i], as_[j])
            jtu.assert_all_close(np.asarray(ans[0])[i, j], carry, rtol=1e-13, atol=1e-14)
            jtu.assert_all_close(np.asarray(ans[1])[i, j], ys, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("scan", SCAN_IMPLS)
def test_scan_reverse_grads(scan):
    """JAX: LaxControlFlowTest.test_scan_reverse (a reverse scan's derivatives by check_grads at order 2)"""
    f = lambda x: scan(lambda c, x: (vt.sin(c) * x, c * x), 0.3, x, reverse=True)  # noqa: E731
    jtu.check_grads(f, (np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0]) / 5,), order=2)


def test_nested_scan_grads():
    """JAX: LaxControlFlowTest.testNestedWhile and testScanGrad: a scan whose body scans, by check_grads at order 2"""
    def f(c, xs):
        def outer(c, x):
            inner_c, ys = vt.scan(lambda a, y: (a * vt.cos(y) + c, a), c, x)
            return inner_c, vt.sum(ys)

        return vt.scan(outer, c, xs)

    xs = np.random.RandomState(0).randn(3, 4)
    jtu.check_grads(f, (0.7, xs), order=2)


def test_fori_loop_hessian():
    """JAX: LaxControlFlowTest.testWhileJVPViaForiLoop (the body made nonlinear: check_grads at order 2 in both
    modes, and hessian against jacfwd of jacrev)"""
    f = lambda x: vt.sum(vt.fori_loop(0, 3, lambda i, x: vt.sin(x) * x + i, x))  # noqa: E731
    x = np.array([0.3, -0.8, 1.1])
    jtu.check_grads(f, (x,), order=2)
    jtu.assert_all_close(vt.hessian(f)(x), vt.jacfwd(vt.jacrev(f))(x), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("jit", [False, True])
def test_while_loop_batched_jvp(jit):
    """JAX: LaxControlFlowTest.testWhileLoopBatched and testWhileJVP: the jvp of a batched while_loop (examples
    leave at different steps) against each example's"""
    fun = lambda x: vt.while_loop(lambda x: x < 3, lambda x: x * x + 1, x)  # noqa: E731
    x = np.array([0.1, 0.5, 1.2, 3.5])
    t = np.array([1.0, 2.0, 3.0, 4.0])
    batched = lambda x, t: vt.jvp(vt.vmap(fun), (x,), (t,))  # noqa: E731
    if jit:
        batched = vt.jit(batched)
    y, dy = batched(x, t)
    for i in range(4):
        yi, dyi = vt.jvp(fun, (x[i],), (t[i],))
        ri, dri = vt.jvp(partial(while_loop_reference, lambda x: x < 3, lambda x: x * x + 1), (x[i],), (t[i],))
        jtu.assert_all_close(np.asarray(y)[i], yi)
        jtu.assert_all_close(np.asarray(dy)[i], dyi)
        jtu.assert_all_close(yi, ri)
        jtu.assert_all_close(dyi, dri)


def test_while_loop_vmap_of_jvp():
    """JAX: LaxControlFlowTest.testWhileJVP under vmap (vmap of the jvp, batched tangents)"""
    cond = lambda x: le(x[0, 2], 8)  # noqa: E731
    loop = partial(vt.while_loop, cond, lambda x: x * x)
    loop_ref = partial(while_loop_reference, cond, lambda x: x * x)
    xs = np.stack([np.arange(9.0).reshape((3, 3)), np.arange(9.0).reshape((3, 3)) / 2 + 1])
    ans = vt.vmap(lambda x: vt.jvp(loop, (x,), (x,)))(xs)
    for i in range(2):
        want = vt.jvp(loop_ref, (xs[i],), (xs[i],))
        jtu.assert_all_close(tuple(np.asarray(a)[i] for a in ans), want, check_dtypes=False)


@pytest.mark.parametrize("jit", [False, True])
def test_cond_vmap_grad_closure(jit):
    """JAX: LaxControlFlowTest.testCondGrad4 under vmap (grad with respect to the operand and to a value a branch
    closes over, per example)"""
    def fun(x, y):
        return vt.cond(x < 3, lambda _: 2.0 * vt.sin(y) * x, lambda x: 2.0 * x * x, x)

    def ref(x, y):
        return 2.0 * vt.sin(y) * x if x < 3 else 2.0 * x * x

    g = vt.vmap(vt.grad(fun, argnums=(0, 1)))
    if jit:
        g = vt.jit(g)
    xs, ys = np.array([2.0, 3.5, 1.0, 4.0]), np.array([5.8, 0.3, -1.0, 2.0])
    ans = g(xs, ys)
    for i in range(4):
        want = vt.grad(ref, argnums=(0, 1))(xs[i], ys[i])
        jtu.assert_all_close(tuple(np.asarray(a)[i] for a in ans), want, check_dtypes=False, rtol=1e-14)


def test_cond_vmap_check_grads():
    """JAX: LaxControlFlowTest.testCondGrad2 under vmap (a batched predicate: check_grads at order 2)"""
    def f(x):
        return vt.sum(vt.vmap(lambda x: vt.cond(x[0] < 2, lambda x: np.array([1.0, 2.0]) * x * x,
                                                lambda x: vt.sin(x), x))(x))

    x = np.array([[2.14, 2.14], [1.72, 1.72], [0.5, 3.0]])
    jtu.check_grads(f, (x,), order=2, rtol={np.float64: 2e-3})


@pytest.mark.parametrize("sum_first_n", [_sum_first_n_tuple, _sum_first_n_dict], ids=["tuple", "dict"])
def test_fori_loop_state_vmap_grad(sum_first_n):
    """JAX: LaxControlFlowTest.testForiLoopTupleState, testForiLoopDictState under vmap and grad (each example's
    gradient of the sum of its first 5 squared values is 2 x on those, 0 after)"""
    x = np.random.RandomState(0).randn(3, 10)
    g = vt.vmap(vt.grad(lambda x: sum_first_n(x * x, 5)))(x)
    want = np.where(np.arange(10) < 5, 2 * x, 0.0)
    jtu.assert_all_close(g, want, rtol=1e-14)
    jtu.assert_all_close(vt.jit(vt.vmap(vt.grad(lambda x: sum_first_n(x * x, 5))))(x), want, rtol=1e-14)


def test_scan_checkpointed_hessian():
    """JAX: LaxControlFlowTest.testScanHigherOrderDifferentiation (a checkpointed scan's Hessian equals the plain
    scan's)"""
    d = 0.75

    def f(c, a):
        b = vt.sin(c * vt.sum(vt.cos(d * a)))
        c = 0.9 * vt.cos(d * vt.sum(vt.sin(c * a)))
        return c, b

    as_ = np.arange(6.0).reshape((3, 2)) / 3
    loss = lambda scan: lambda c: vt.sum(scan(f, c, as_)[1]) + scan(f, c, as_)[0]  # noqa: E731
    c = np.array(1.0)
    jtu.assert_all_close(vt.hessian(loss(_scan_checkpointed))(c), vt.hessian(loss(vt.scan))(c), rtol=1e-12)
    jtu.assert_all_close(vt.hessian(loss(vt.scan))(c), vt.hessian(loss(scan_reference))(c), rtol=1e-12)


# --- JAX's forwarding and constification tests: loops whose carries are forwarded, constant or rewritten ----------


def split_list(args, ns):
    args = list(args)
    lists = []
    for n in ns:
        lists.append(args[:n])
        args = args[n:]
    lists.append(args)
    return lists


def _sampled(ranges, repeat, count):
    """`count` of the itertools.product(ranges, repeat=repeat) cases JAX runs, evenly spaced."""
    import itertools

    cases = list(itertools.product(range(ranges), repeat=repeat))
    return [cases[i] for i in np.linspace(0, len(cases) - 1, count).astype(int)]


def test_while_readonly_carry_optimization():
    """JAX: LaxControlFlowTest.test_while_readonly_carry_optimization (float counter; w mapped back with out_axes 0,
    JAX's out_axes=(None, 0) being unsupported)"""
    def foo(w, x, c_max):
        def while_body(val):
            c, x, w = val
            return c + 1, x @ w, w

        _, x, w = vt.while_loop(lambda val: val[0] < c_max, while_body, (0.0, x, w))
        return w, x

    w, xs, c_maxs = np.ones((2, 2)), np.ones((4, 2)), np.arange(4.0)
    w_, x_ = vt.vmap(foo, in_axes=(None, 0, 0))(w, xs, c_maxs)
    jtu.assert_all_close(w_, np.broadcast_to(w, (4, 2, 2)), check_dtypes=False)
    jtu.assert_all_close(x_, np.stack([xs[i] @ np.linalg.matrix_power(w, i) for i in range(4)]), check_dtypes=False)


@pytest.mark.parametrize("seed, num_body_consts, num_inplace_fwds_cond_uses, num_inplace_fwds_cond_doesnt_use, "
                         "num_noninplace_fwds", _sampled(3, 5, 9))
def test_while_constification_correctness(seed, num_body_consts, num_inplace_fwds_cond_uses,
                                          num_inplace_fwds_cond_doesnt_use, num_noninplace_fwds):
    """JAX: LaxControlFlowTest.test_while_constification_correctness (9 of its 243 cases; a float counter)"""
    num_fwds = num_inplace_fwds_cond_uses + num_inplace_fwds_cond_doesnt_use + num_noninplace_fwds
    num_carry = num_fwds + 4
    rng = np.random.RandomState(seed)
    perm = rng.permutation(num_carry)
    iperm = np.argsort(perm)
    body_consts = [rng.randn(3) for _ in range(num_body_consts)]
    init_vals = list(rng.uniform(size=num_carry))

    def cond_fun(c):
        i, c = c
        c = [c[i] for i in iperm]
        c, _ = split_list(c, [num_inplace_fwds_cond_uses])
        return (i < 2) + 0.0 * sum(c)

    def body_fun(c):
        i, c = c
        c = [c[i] for i in iperm]
        inplace_fwds, noninplace_fwds, dont_fwd = split_list(
            c, [num_inplace_fwds_cond_uses + num_inplace_fwds_cond_doesnt_use, num_noninplace_fwds])
        dont_fwd = [vt.sin(x) * sum(vt.sum(c) for c in body_consts) for x in dont_fwd]
        new_c_perm = [*inplace_fwds, *dont_fwd, *noninplace_fwds]
        return (i + 1, [new_c_perm[i] for i in perm])

    i, outs = vt.while_loop(cond_fun, body_fun, (0.0, init_vals))
    assert float(i) == 2
    _, outs_ref = body_fun(body_fun((0.0, [vt.asarray(v) for v in init_vals])))
    jtu.assert_all_close(outs, outs_ref, check_dtypes=False)


def test_while_constification_correctness_manually():
    """JAX: LaxControlFlowTest.test_while_constification_correctness_manually"""
    def body_fun(c):
        for _ in range(2):
            vt.sin(np.zeros(3))
        return 0.0, 1.0, c[0]

    outs = vt.while_loop(lambda c: vt.equal(c[1], 0.0), body_fun, (5.0, 0.0, 3.14))
    jtu.assert_all_close(outs, (0.0, 1.0, 5.0))


def test_scan_readonly_carry_optimization():
    """JAX: LaxControlFlowTest.test_scan_readonly_carry_optimization (JAX asserts no crash under out_axes=None; here
    mapped at 0, each example's y)"""
    def f(x, y):
        def g(_, y):
            y, _ = vt.scan(lambda y, _: (y, None), y, None, length=1)
            return y

        return vt.cond(x < 0, g, g, x, y)

    out = vt.vmap(f, (0, None))(np.arange(3.0), 3.0)
    jtu.assert_all_close(out, np.full(3, 3.0))


@pytest.mark.parametrize("seed, num_body_consts, num_inplace_fwds, num_noninplace_fwds", _sampled(3, 4, 9))
def test_scan_constification_correctness(seed, num_body_consts, num_inplace_fwds, num_noninplace_fwds):
    """JAX: LaxControlFlowTest.test_scan_constification_correctness (9 of its 81 cases; ys 0. where JAX's are int 0)"""
    num_carry = num_inplace_fwds + num_noninplace_fwds + 4
    rng = np.random.RandomState(seed)
    perm = rng.permutation(num_carry)
    iperm = np.argsort(perm)
    body_consts = [rng.randn(3) for _ in range(num_body_consts)]
    init_vals = list(rng.uniform(size=num_carry))

    def body_fun(c, _):
        c = [c[i] for i in iperm]
        inplace_fwds, noninplace_fwds, dont_fwd = split_list(c, [num_inplace_fwds, num_noninplace_fwds])
        dont_fwd = [vt.sin(x) * sum(vt.sum(c) for c in body_consts) for x in dont_fwd]
        new_c_perm = [*inplace_fwds, *dont_fwd, *noninplace_fwds]
        return [new_c_perm[i] for i in perm], [0.0 for _ in range(3)]

    xs = [np.arange(2.0) for _ in range(2)]
    outs = vt.scan(body_fun, init_vals, xs)[0]
    init = [vt.asarray(v) for v in init_vals]
    outs_ref = body_fun(body_fun(init, [x[0] for x in xs])[0], [x[1] for x in xs])[0]
    jtu.assert_all_close(outs, outs_ref, check_dtypes=False)


def _forwarding_body(rng, num_body_consts, num_const_fwds, num_input_fwds):
    num_carry = num_const_fwds + 4
    num_xs = num_input_fwds + 2
    num_ys = num_xs + 1
    carry_perm = rng.permutation(num_carry)
    carry_iperm = np.argsort(carry_perm)
    xs_perm = rng.permutation(num_xs)
    ys_perm = rng.permutation(num_ys)
    f = np.arange(num_xs)
    f = [f[i] if idx < num_input_fwds else None for idx, i in enumerate(xs_perm)]
    f += [None]
    in_fwd = [f[i] for i in ys_perm]
    body_consts = [rng.randn(3) for _ in range(num_body_consts)]
    init_vals = list(rng.uniform(size=num_carry))

    def body_fun(c, x):
        c = [c[i] for i in carry_iperm]
        carry_fwds, carry_dont_fwd = split_list(c, [num_const_fwds])
        carry_dont_fwd = [vt.sin(x) * sum(vt.sum(c) for c in body_consts) for x in carry_dont_fwd]
        new_c_perm = [*carry_fwds, *carry_dont_fwd]
        new_c = [new_c_perm[i] for i in carry_perm]
        x = [x[i] for i in xs_perm]
        x_fwd, x_dont_fwd = split_list(x, [num_input_fwds])
        x_dont_fwd = [vt.cos(x) * sum(vt.sum(c) for c in body_consts) for x in x_dont_fwd]
        y = [*x_fwd, *x_dont_fwd, 0.0]
        return new_c, [y[i] for i in ys_perm]

    xs = list(rng.uniform(size=(num_xs, 2)))
    return body_fun, init_vals, xs, in_fwd


@pytest.mark.parametrize("seed, num_body_consts, num_const_fwds, num_input_fwds", _sampled(3, 4, 9))
def test_scan_forwarding_correctness(seed, num_body_consts, num_const_fwds, num_input_fwds):
    """JAX: LaxControlFlowTest.test_scan_forwarding_correctness (9 of its 81 cases)"""
    body_fun, init_vals, xs, in_fwd = _forwarding_body(np.random.RandomState(seed), num_body_consts, num_const_fwds,
                                                       num_input_fwds)
    final, outs = vt.scan(body_fun, init_vals, xs)
    for f, y in zip(in_fwd, outs):
        if f is not None:
            jtu.assert_all_close(y, xs[f])
    init = [vt.asarray(v) for v in init_vals]
    final_ref = body_fun(body_fun(init, [x[0] for x in xs])[0], [x[1] for x in xs])[0]
    jtu.assert_all_close(final, final_ref, check_dtypes=False)


@pytest.mark.parametrize("seed, num_body_consts, num_const_fwds, num_input_fwds", _sampled(3, 4, 9))
def test_scan_vjp_forwarding_correctness(seed, num_body_consts, num_const_fwds, num_input_fwds):
    """JAX: LaxControlFlowTest.test_scan_vjp_forwarding_correctness (its forwarded carries, xs and ys, without the
    custom_jvp vtape lacks: the scan's vjp against the unrolled loop's, scan_reference)"""
    body_fun, init_vals, xs, _ = _forwarding_body(np.random.RandomState(seed), max(num_body_consts, 1),
                                                  num_const_fwds, num_input_fwds)
    xs = np.stack(xs, axis=1)  # rows are steps

    def unrolled(init, xs):
        c, ys = init, []
        for t in range(xs.shape[0]):
            c, y = body_fun(c, list(xs[t]))
            ys.append(vt.stack([vt.asarray(v) for v in y]))
        return c, vt.stack(ys)

    scanned = lambda init, xs: (lambda r: (r[0], vt.stack(r[1], 1)))(  # noqa: E731
        vt.scan(lambda c, x: body_fun(c, list(x)), init, xs))
    (final, outs), vjp = vt.vjp(scanned, init_vals, xs)
    (final_ref, outs_ref), vjp_ref = vt.vjp(unrolled, init_vals, xs)
    jtu.assert_all_close(final, final_ref, check_dtypes=False, rtol=1e-14)
    jtu.assert_all_close(outs, outs_ref, check_dtypes=False, rtol=1e-14)
    jtu.assert_all_close(vjp((final, outs)), vjp_ref((final, outs)), check_dtypes=False, rtol=1e-13, atol=1e-15)
