"""Loops and branches in the shape of JAX's lax: scan, fori_loop, while_loop, cond, over pytrees.

Each is the C++ loop op (autodiff/loops.hpp): the body is traced once and run once per step, never unrolled, eagerly
as under jit; scan and fori_loop are differentiable (the carries stored, or every k-th with checkpoint_every=k),
while_loop is forward only; all of them vmap. Carries, xs and ys may be of any dtype (integer counters, bool flags):
the loop op moves them as one flat vector of one floating-point dtype (_storage_dtype), and the body sees each
tensor in its own dtype; a body returns every carry in init's dtype, as JAX's.
"""

from __future__ import annotations

from typing import Any, Callable

from . import _vtape
from ._tensor import asarray
from ._tree import TreeDef, tree_flatten, tree_unflatten


def _leaves(tree) -> tuple[list, TreeDef]:
    leaves, d = tree_flatten(tree)
    return [asarray(x) for x in leaves], d


def _storage_dtype(leaves: list) -> str:
    """The dtype a loop moves its tensors in: float32 where every carry and xs tensor is float32, else float64
    (integers and bools are exact in it below 2^53; integer ys of a float32 loop below 2^24)."""
    return "float32" if leaves and all(x.dtype_name == "float32" for x in leaves) else "float64"


def _as(leaves: list, dtypes) -> list:
    """Each tensor in its dtype (one dtype for all, or one each)."""
    dtypes = [dtypes] * len(leaves) if isinstance(dtypes, str) else dtypes
    return [x if x.dtype_name == d else _vtape.astype(x, d) for x, d in zip(leaves, dtypes)]


def _check_dtypes(got: list, want: list, name: str, what: str) -> None:
    for k, (x, d) in enumerate(zip(got, want)):
        if x.dtype_name != d:
            raise TypeError(f"{name}: the body returns {what} {k} as {x.dtype_name} where init's is {d}; a loop keeps "
                            f"each {what}'s dtype (convert with astype)")


def _loop(f: Callable, init: Any, xs_leaves: list, x_def, index_x: bool, length: int, first_index: int,
          reverse: bool, checkpoint_every: int, name: str):
    init_leaves, init_def = _leaves(init)
    carry_shapes = _vtape._leaf_shapes(init_leaves, False)
    x_shapes = _vtape._leaf_shapes(xs_leaves, True)
    carry_dtypes = [x.dtype_name for x in init_leaves]
    x_dtypes = [x.dtype_name for x in xs_leaves]
    storage = _storage_dtype(init_leaves + xs_leaves)
    y_layout: dict = {}

    def body(a):  # a: [step index, flat carry, flat x when there are xs]
        carry = tree_unflatten(init_def, _as(_vtape._unpack(a[1], carry_shapes, -1), carry_dtypes))
        if index_x:
            x = a[0]
        elif x_def is None:
            x = None
        elif not xs_leaves:  # xs a pytree without arrays, () say: the body gets it as it is
            x = tree_unflatten(x_def, [])
        else:
            x = tree_unflatten(x_def, _as(_vtape._unpack(a[2], x_shapes, -1), x_dtypes))
        out = f(carry, x)
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError(f"{name}: the body must return a pair (carry, y)")
        nxt, next_def = _leaves(out[0])
        if next_def != init_def:
            raise TypeError(f"{name}: the body returns a carry of structure {next_def!r}, not init's {init_def!r}")
        _check_dtypes(nxt, carry_dtypes, name, "carry")
        _vtape._check_leaves(nxt, carry_shapes, name, "carry")
        ys, y_def = _leaves(out[1])
        if not y_layout:
            y_layout.update(shapes=_vtape._leaf_shapes(ys, False), tree=y_def, dtypes=[y.dtype_name for y in ys])
        elif y_def != y_layout["tree"]:
            raise TypeError(f"{name}: the body's y changed structure from {y_layout['tree']!r} to {y_def!r}")
        _vtape._check_leaves(ys, y_layout["shapes"], name, "y")
        _check_dtypes(ys, y_layout["dtypes"], name, "y")
        return _vtape._pack(_as(nxt, storage), a[1], name, "carry"), _vtape._pack(_as(ys, storage), a[1], name, "y")

    flat_init = _vtape._pack_init(_as(init_leaves, storage), name)
    flat_xs = _vtape._pack_rows(_as(xs_leaves, storage), length, flat_init, name) if xs_leaves else None
    final, flat_ys = _vtape._scan_results(body, flat_init, flat_xs, length, first_index, reverse, checkpoint_every,
                                          name)
    carry = tree_unflatten(init_def, _as(_vtape._unpack(final, carry_shapes, -1), carry_dtypes))
    ys = tree_unflatten(y_layout["tree"], _as(_vtape._unpack(flat_ys, y_layout["shapes"], length), y_layout["dtypes"]))
    return carry, ys


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         checkpoint_every: int = 0, *, unroll=None):
    """scan(f, init, xs) -> (final carry, ys): `carry, y = f(carry, x)` for each x along the leading axis of xs (a
    pytree of arrays of one length), ys stacking every y along a new leading axis. With xs None, `length` steps and
    x None (as JAX). `reverse` runs from the last step to the first; `checkpoint_every` = k > 0 stores every k-th
    carry for reverse mode and recomputes the rest. `unroll` is accepted and ignored (the body is one op)."""
    del unroll
    if xs is None:
        if length is None:
            raise ValueError("scan: give xs or length")
        return _loop(f, init, [], None, False, int(length), 0, reverse, checkpoint_every, "scan")
    xs_leaves, x_def = _leaves(xs)
    if not xs_leaves:  # a pytree without arrays: the length says how many steps
        if length is None:
            raise ValueError("scan: xs holds no array; give length")
        return _loop(f, init, [], x_def, False, int(length), 0, reverse, checkpoint_every, "scan")
    n = _vtape._loop_length(xs_leaves, "scan")
    if length is not None and int(length) != n:
        raise ValueError(f"scan: length {length} but xs have {n} rows")
    return _loop(f, init, xs_leaves, x_def, False, n, 0, reverse, checkpoint_every, "scan")


def _concrete_int(bound):
    """A loop bound as a Python int where its value is known (a number, or a tensor outside jit), else None."""
    if isinstance(bound, (int, float)) or hasattr(bound, "__index__") and not isinstance(bound, _vtape.Tensor):
        return int(bound)
    try:
        return int(float(_vtape.stop_gradient(asarray(bound))))  # a bound has no derivative, even under grad
    except (_vtape.Error, TypeError, ValueError):
        return None  # traced: its value is known only when the plan runs


def fori_loop(lower, upper, body_fun: Callable, init_val: Any, *, unroll=None):
    """val = body_fun(i, val) for i = lower, ..., upper - 1 (i an int64 scalar tensor); init_val when upper <= lower.
    With bounds known when it is called (numbers, or tensors outside jit) it is a scan, differentiable; with a traced
    bound (under jit) a while_loop, forward only, as JAX's. `unroll` is accepted and ignored (the body is one op)."""
    del unroll
    lo, hi = _concrete_int(lower), _concrete_int(upper)
    if lo is not None and hi is not None:
        if hi <= lo:
            return init_val
        step = lambda carry, i: (body_fun(i, carry), None)  # noqa: E731
        return _loop(step, init_val, [], None, True, hi - lo, lo, False, 0, "fori_loop")[0]
    # A traced bound: a while_loop whose carry holds the int64 counter.
    first = _vtape.astype(asarray(lower), "int64")
    last = asarray(upper)
    i, val = while_loop(lambda s: s[0] < last, lambda s: (s[0] + 1, body_fun(s[0], s[1])), (first, init_val))
    return val


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any):
    """val = body_fun(val) while cond_fun(val) (a scalar, nonzero meaning true). Forward only. body_fun never runs on
    the value the loop exits with; batched, it runs until every example is done, and a finished example keeps its
    value."""
    init_leaves, init_def = _leaves(init_val)
    if not init_leaves:  # nothing to carry: the loop can only end at once, or never
        if _vtape._concrete_truth(asarray(cond_fun(init_val))) is False:
            return init_val
        raise _vtape.Error("while_loop: the carry holds no tensor, and the predicate is not a false constant: the loop "
                           "would never end")
    shapes = _vtape._leaf_shapes(init_leaves, False)
    dtypes = [x.dtype_name for x in init_leaves]
    storage = _storage_dtype(init_leaves)

    def carry_of(flat):
        return tree_unflatten(init_def, _as(_vtape._unpack(flat, shapes, -1), dtypes))

    def flat_cond(flat):
        return asarray(cond_fun(carry_of(flat)))

    def flat_body(flat):
        nxt, next_def = _leaves(body_fun(carry_of(flat)))
        if next_def != init_def:
            raise TypeError(f"while_loop: the body returns structure {next_def!r}, not init_val's {init_def!r}")
        _check_dtypes(nxt, dtypes, "while_loop", "carry")
        _vtape._check_leaves(nxt, shapes, "while_loop", "carry")
        return _vtape._pack(_as(nxt, storage), flat, "while_loop", "carry")

    out = _vtape._while_flat(flat_cond, flat_body, _vtape._pack_init(_as(init_leaves, storage), "while_loop"))
    return carry_of(out)


def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    """true_fun(*operands) where pred (a scalar) is nonzero, else false_fun(*operands); the branches return the same
    structure and shapes. A concrete pred runs one branch; a traced (jit) or batched (vmap) one runs both and
    selects. No derivative reaches anything through the branch not taken: each branch reads its operands and what it
    closes over masked by the predicate (as JAX's cond under vmap), so a branch that guards against sqrt(0) gives no
    NaN gradient."""
    pred = asarray(pred)
    structures: list = []

    def flat(fun: Callable):
        def run():
            leaves, d = _leaves(fun(*operands))
            if structures and d != structures[0]:
                raise TypeError(f"cond: the branches return structures {structures[0]!r} and {d!r}")
            structures.append(d)
            return leaves

        return run

    outs = _vtape._cond_flat(pred, flat(true_fun), flat(false_fun))
    return tree_unflatten(structures[0], outs)
