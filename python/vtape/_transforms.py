"""The transforms, in JAX's shape: grad, value_and_grad, vjp, jvp, jacfwd, jacrev, hessian, hvp, vmap and jit, taking
Python callables of pytrees (tuples, lists, dicts) of tensors. Each flattens its arguments and results and calls the
C++ transform over flat lists of tensors (vtape._vtape), so the semantics are the C++ library's (docs/guide.md).
"""

from __future__ import annotations

import functools
import inspect
import numbers
from typing import Any, Callable, Sequence

import numpy as np

from . import _vtape
from ._tensor import asarray
from ._tree import tree_flatten, tree_unflatten
from ._vtape import Tensor

class StructureError(_vtape.Error, TypeError):
    """A function's arguments or results do not have the structure, rank or dtype a transform needs (grad of a
    non-scalar or integer result, an integer variable, tangents or cotangents of another structure or dtype). JAX
    raises TypeError there; this is both a vtape.Error and a TypeError."""


#: out_axes value that keeps vmap's results batched (the batch a first-class dimension, vtape.as_batch's).
batched = _vtape.batched_out


def _tensor_leaves(leaves: list) -> list[Tensor]:
    return [asarray(x) for x in leaves]


def _flatten_args(args: Sequence[Any]):
    """The leaves of each argument, as tensors, and what rebuilds the arguments from a flat list."""
    flat, defs, starts = [], [], []
    for a in args:
        leaves, d = tree_flatten(a)
        starts.append(len(flat))
        flat.extend(_tensor_leaves(leaves))
        defs.append(d)

    def rebuild(xs: list) -> list:
        return [tree_unflatten(d, xs[s : s + d.num_leaves]) for d, s in zip(defs, starts)]

    return flat, defs, starts, rebuild


def _argnums(argnums, n: int, name: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not -n <= i < n:
            raise ValueError(f"{name}: argnum {i} is out of range for a function of {n} arguments")
    return tuple(i % n for i in nums)


def _variables(flat: list, defs: list, starts: list, nums: Sequence[int], name: str,
               allow_int: bool = False) -> list[int]:
    """The flat indices of the leaves of arguments `nums`, each checked to be floating-point (naming its argument and
    leaf, which the flat index would not); with allow_int, integer and bool leaves are left out."""
    wrt = []
    for i in nums:
        for j in range(defs[i].num_leaves):
            leaf = flat[starts[i] + j]
            if leaf.dtype.kind != "f" and allow_int:
                continue
            if leaf.dtype.kind != "f":
                where = f"argument {i}" if defs[i].kind == "leaf" else f"leaf {j} of argument {i}"
                raise StructureError(
                    f"{name}: {where} is {leaf.dtype} of shape {tuple(leaf.shape)}, which has no derivative; "
                    "differentiate with respect to floating-point arguments (leave it out of argnums, or convert it "
                    "with astype)"
                )
            wrt.append(starts[i] + j)
    return wrt


def _per_argument(flat: list, nums: Sequence[int], defs: list, single: bool):
    """Derivatives for the leaves of arguments `nums`, in order, as a pytree of each argument's structure: that one
    tree for a single argnum, else a tuple of them."""
    trees, k = [], 0
    for i in nums:
        trees.append(tree_unflatten(defs[i], flat[k : k + defs[i].num_leaves]))
        k += defs[i].num_leaves
    return trees[0] if single else tuple(trees)


def value_and_grad(f: Callable, argnums=0, has_aux: bool = False, allow_int: bool = False) -> Callable:
    """value_and_grad(f, argnums)(*args) -> (f(*args), gradient): the gradient with respect to argument `argnums`
    (a pytree of its shape), or a tuple of them for a tuple of argnums. f returns a scalar, or (scalar, aux) with
    has_aux, when the result is ((scalar, aux), gradient). With allow_int, integer and bool leaves among them are
    allowed and get zeros of their own dtype (JAX's float0 zeros)."""

    @functools.wraps(f)
    def run(*args, **kwargs):
        # Keyword arguments reach f as they are, not differentiated (JAX's rule).
        nums = _argnums(argnums, len(args), "grad")
        flat, defs, starts, rebuild = _flatten_args(args)
        wrt = _variables(flat, defs, starts, nums, "grad", allow_int)
        aux = []

        def flat_f(xs):
            out = f(*rebuild(xs), **kwargs)
            if has_aux:
                if not isinstance(out, tuple) or len(out) != 2:
                    raise TypeError("grad with has_aux: the function must return a pair (scalar, aux)")
                out, extra = out
                aux.append(extra)
            out = asarray(out)
            if out.shape != () or out.dtype.kind != "f":
                raise StructureError(
                    f"grad: the function must return a floating-point scalar, got {out.dtype} of shape "
                    f"{tuple(out.shape)}; use vjp with a cotangent, or jacrev, for other results"
                )
            return [out]

        value, grads = _vtape.value_and_grad_flat(flat_f, flat, wrt)
        if allow_int:  # the integer leaves' zeros in their places
            found = dict(zip(wrt, grads))
            grads = [found[starts[i] + j] if starts[i] + j in found else
                     _vtape.zeros(flat[starts[i] + j].shape, dtype=flat[starts[i] + j].dtype_name)
                     for i in nums for j in range(defs[i].num_leaves)]
        gradient = _per_argument(grads, nums, defs, isinstance(argnums, int))
        return ((value, aux[0]) if has_aux else value), gradient

    return run


def grad(f: Callable, argnums=0, has_aux: bool = False, allow_int: bool = False) -> Callable:
    """The gradient of scalar f with respect to argument `argnums` (see value_and_grad)."""
    vg = value_and_grad(f, argnums, has_aux, allow_int)

    @functools.wraps(f)
    def run(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return run


def vjp(f: Callable, *primals, has_aux: bool = False):
    """vjp(f, *primals) -> (f(*primals), pullback): pullback(cotangent) returns one cotangent per primal (a tuple),
    the cotangent a pytree of f's result's structure. With has_aux f returns (result, aux) and vjp returns
    (result, pullback, aux)."""
    flat, defs, starts, rebuild = _flatten_args(primals)
    out_def = []
    aux = []

    def flat_f(xs):
        out = f(*rebuild(xs))
        if has_aux:
            out, extra = out
            aux.append(extra)
        leaves, d = tree_flatten(out)
        out_def.append(d)
        return _tensor_leaves(leaves)

    outs, pull = _vtape.vjp_flat(flat_f, flat)
    result = tree_unflatten(out_def[0], outs)

    def pullback(cotangent):
        leaves, d = tree_flatten(cotangent)
        if d != out_def[0]:
            raise StructureError(f"vjp: the cotangent's structure {d!r} is not the result's {out_def[0]!r}")
        cots = pull(_tensor_leaves(leaves))
        return tuple(rebuild(cots))

    return (result, pullback, aux[0]) if has_aux else (result, pullback)


def jvp(f: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False):
    """jvp(f, primals, tangents) -> (f(*primals), J tangents): the tangents a sequence of pytrees of the primals'
    structures (each leaf of its primal's shape and dtype). With has_aux, f returns (out, aux) and jvp returns
    (out, J tangents, aux), aux carrying no tangent."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise StructureError(f"jvp: {len(tangents)} tangents for {len(primals)} primals")
    flat, defs, starts, rebuild = _flatten_args(primals)
    flat_t, defs_t, _, _ = _flatten_args(tangents)
    if defs != defs_t:
        raise StructureError(f"jvp: the tangents' structures {defs_t!r} differ from the primals' {defs!r}")
    for i, (x, t) in enumerate(zip(flat, flat_t)):
        if x.dtype.kind == "f" and x.dtype != t.dtype:
            raise StructureError(f"jvp: tangent {i} is {t.dtype}, its primal {x.dtype}; a tangent has its primal's dtype")
    out_def = []
    aux = []

    def flat_f(xs):
        out = f(*rebuild(xs))
        if has_aux:
            if not isinstance(out, tuple) or len(out) != 2:
                raise StructureError("jvp with has_aux: the function must return a pair (out, aux)")
            out, extra = out
            aux.append(extra)
        leaves, d = tree_flatten(out)
        out_def.append(d)
        return _tensor_leaves(leaves)

    outs, touts = _vtape.jvp_flat(flat_f, flat, flat_t)
    result = (tree_unflatten(out_def[0], outs), tree_unflatten(out_def[0], touts))
    return result + (aux[0],) if has_aux else result


def _jacobian(flat_transform, name: str, f: Callable, argnums, has_aux: bool) -> Callable:
    def run(*args):
        nums = _argnums(argnums, len(args), name)
        flat, defs, starts, rebuild = _flatten_args(args)
        wrt = _variables(flat, defs, starts, nums, name)
        out_def, aux = [], []

        def flat_f(xs):
            out = f(*rebuild(xs))
            if has_aux:
                if not isinstance(out, tuple) or len(out) != 2:
                    raise TypeError(f"{name} with has_aux: the function must return a pair (result, aux)")
                out, extra = out
                aux.append(extra)
            leaves, d = tree_flatten(out)
            out_def.append(d)
            return _tensor_leaves(leaves)

        # No leaf to differentiate (empty pytrees): every Jacobian is an empty structure.
        jac = flat_transform(flat_f, flat, wrt) if wrt else [[] for _ in flat_f(flat)]
        result = tree_unflatten(out_def[0], [_per_argument(row, nums, defs, isinstance(argnums, int)) for row in jac])
        return (result, aux[0]) if has_aux else result

    return functools.wraps(f)(run)


def jacfwd(f: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """The Jacobian of f with respect to argument `argnums`, in JAX's structure: f's result (a pytree) with each leaf
    (shape S) replaced by a pytree of the argument's structure whose leaves (shape X) are S + X; a tuple of those per
    leaf for a tuple of argnums. f runs once, then one forward sweep per element of the arguments. With has_aux f
    returns (result, aux) and jacfwd returns (Jacobian, aux)."""
    return _jacobian(_vtape.jacfwd_flat, "jacfwd", f, argnums, has_aux)


def jacrev(f: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """The same Jacobian, by one reverse sweep per element of f's results."""
    return _jacobian(_vtape.jacrev_flat, "jacrev", f, argnums, has_aux)


def hessian(f: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """The second derivatives of scalar f with respect to argument `argnums`: jacfwd of grad (forward over reverse),
    H[i][j] of shape X_i + X_j for pytree leaves i and j (as jax.hessian's structure)."""
    return jacfwd(grad(f, argnums, has_aux), argnums, has_aux)


def hvp(f: Callable) -> Callable:
    """hvp(f)(x, v): the Hessian of scalar f at x times v, without forming the Hessian (forward over reverse)."""
    return lambda x, v: jvp(grad(f), (x,), (v,))[1]


class _Vmapped:
    """vmap(f): a callable that jit recognises, so that jit(vmap(f)) never traces again for a new batch size."""

    def __init__(self, f: Callable, in_axes, out_axes, axis_size=None):
        functools.update_wrapper(self, f, updated=())  # the name and docstring, not f's attributes
        self.f, self.in_axes, self.out_axes, self.axis_size = f, in_axes, out_axes, axis_size

    def leaf_axes(self, args, defs) -> list:
        """One axis (or None) per leaf: in_axes is an int or None for every argument, or one entry per argument,
        each an int or None for all its leaves or a pytree of its structure (JAX's prefix rule)."""
        axes = self.in_axes
        if any(isinstance(a, bool) for a in tree_flatten(axes, is_leaf=lambda x: x is None)[0]):
            raise TypeError(f"vmap: in_axes must be ints or None (or pytrees of them), got {axes!r}")
        if isinstance(axes, (int, type(None))):
            axes = [axes] * len(args)
        if len(axes) != len(args):
            raise ValueError(f"vmap: {len(axes)} in_axes for a function of {len(args)} arguments")
        out = []
        for i, (a, d) in enumerate(zip(axes, defs)):
            if isinstance(a, (int, type(None))):
                out.extend([a] * d.num_leaves)
                continue
            leaves, ad = tree_flatten(a, is_leaf=lambda x: x is None)
            if ad != d:
                raise ValueError(f"vmap: in_axes {a!r} for argument {i} does not have the argument's structure {d!r}")
            out.extend(leaves)
        return out

    def __call__(self, *args, out_axes=None, **kwargs):
        if kwargs:  # mapped over their leading axes whatever in_axes says, as JAX maps keyword arguments
            n = len(args)
            args = _positional(self.f, args, kwargs, "vmap")
            axes = self.in_axes
            axes = [axes] * n if axes is None or isinstance(axes, int) else list(axes)
            if len(axes) != n:
                raise ValueError(f"vmap: {len(axes)} in_axes for {n} positional arguments (keyword arguments are "
                                 "mapped over axis 0)")
            mapped = _Vmapped(self.f, tuple(axes) + (0,) * (len(args) - n), self.out_axes, self.axis_size)
            return mapped(*args, out_axes=out_axes)
        passed = self._passed_through(args)
        if passed:  # arguments that are not arrays, with in_axes None: closed over, as they are
            dynamic = [i for i in range(len(args)) if i not in passed]

            def f(*xs):
                full = list(args)
                for i, x in zip(dynamic, xs):
                    full[i] = x
                return self.f(*full)

            in_axes = [self.in_axes[i] for i in dynamic] if isinstance(self.in_axes, (tuple, list)) else self.in_axes
            inner = _Vmapped(f, in_axes, self.out_axes, self.axis_size)
            return inner(*[args[i] for i in dynamic], out_axes=out_axes)
        flat, defs, starts, rebuild = _flatten_args(args)
        out_def = []
        returned: list = []

        def flat_f(xs):
            leaves, d = tree_flatten(self.f(*rebuild(xs)))
            out_def.append(d)
            returned[:] = _tensor_leaves(leaves)
            return returned

        in_axes = self.leaf_axes(args, defs)
        axes = self.out_axes if out_axes is None else out_axes
        if axes is not _PLAIN_UNLESS_BATCHED and any(
                a is not None and (not isinstance(a, int) or isinstance(a, bool))
                for a in tree_flatten(axes, is_leaf=lambda x: x is None)[0]):
            raise TypeError(f"vmap: out_axes must be ints or None (or pytrees of them), got {axes!r}")
        if all(a is None for a in in_axes) and self.axis_size is not None:
            return self._unmapped(flat_f, flat, axes, out_def)
        if self.axis_size is not None:
            for x, a in zip(flat, in_axes):
                if a is not None and not x.is_batched and x.shape[a] != self.axis_size:
                    raise ValueError(f"vmap: axis_size {self.axis_size}, but a mapped axis has size {x.shape[a]}")
        if axes is _PLAIN_UNLESS_BATCHED:
            # Arguments that are batches already (vtape.as_batch) give batches: under jit their size is not known
            # while tracing, so plain [B, ...] results could not be made there.
            mapped_batches = any(a is not None and x.is_batched for a, x in zip(in_axes, flat))
            axes = batched if mapped_batches else 0
        if isinstance(axes, int) and not isinstance(axes, bool):
            outs = _vtape.vmap_flat(flat_f, flat, in_axes, axes)
            return tree_unflatten(out_def[0], outs)
        # out_axes None or a pytree: each result leaf at its own axis, None for a result that must not depend on the
        # mapped arguments (it is returned as the function made it).
        if _vtape._in_vmap_body():
            raise _vtape.Error("vmap: out_axes None or a pytree inside another vmap's body is not supported; give "
                               "the inner vmap one int out_axes")
        outs = _vtape.vmap_flat(flat_f, flat, in_axes, batched)
        leaf_axes = _prefix_axes(axes, tree_unflatten(out_def[0], returned))
        results = []
        for j, (r, inner, a) in enumerate(zip(outs, returned, leaf_axes)):
            if a is None:
                if inner.is_batched:
                    raise ValueError(f"vmap: out_axes None for result {j}, which depends on the mapped arguments "
                                     f"(every example's differs); give it an axis")
                results.append(inner)
            else:
                results.append(r if a == batched else _batch_at(_vtape.unbatch(r), a))
        return tree_unflatten(out_def[0], results)

    def _passed_through(self, args) -> set:
        """The arguments with in_axes None that are not arrays (functions, strings, ...): JAX passes them through."""
        axes = self.in_axes
        if axes is None:
            axes = [None] * len(args)
        if not isinstance(axes, (tuple, list)) or len(axes) != len(args):
            return set()
        return {i for i, (a, x) in enumerate(zip(axes, args)) if a is None and not _holds_arrays_only(x)}

    def _unmapped(self, flat_f, flat, axes, out_def):
        """No argument mapped, the size given by axis_size: f once, each result repeated axis_size times."""
        outs = flat_f(flat)
        tree = tree_unflatten(out_def[0], outs)
        leaf_axes = _prefix_axes(0 if axes is _PLAIN_UNLESS_BATCHED else axes, tree)
        n = self.axis_size
        results = []
        for x, a in zip(outs, leaf_axes):
            if a is None:
                results.append(x)
                continue
            plain = _vtape.broadcast_to(_vtape.reshape(x, (1,) + x.shape), (n,) + x.shape)
            results.append(_vtape.as_batch(plain) if a == batched else _batch_at(plain, a))
        return tree_unflatten(out_def[0], results)


def _holds_arrays_only(x) -> bool:
    leaves, _ = tree_flatten(x)
    return all(isinstance(v, (Tensor, np.ndarray, np.generic, numbers.Number)) for v in leaves)


def _prefix_axes(axes, tree) -> list:
    """One out axis per leaf of tree: axes an int or None for a whole subtree, or a pytree of them that is a prefix
    of tree's structure (JAX's rule)."""
    if axes is None or isinstance(axes, int) and not isinstance(axes, bool):
        return [axes] * len(tree_flatten(tree)[0])
    if isinstance(axes, dict) and isinstance(tree, dict) and axes.keys() == tree.keys():
        return [a for k in sorted(tree) for a in _prefix_axes(axes[k], tree[k])]
    if isinstance(axes, (tuple, list)) and isinstance(tree, (tuple, list)) and len(axes) == len(tree):
        return [a for x, t in zip(axes, tree) for a in _prefix_axes(x, t)]
    if not isinstance(axes, (tuple, list, dict)):
        raise TypeError(f"vmap: out_axes must be ints or None (or pytrees of them), got {axes!r}")
    raise ValueError(f"vmap: out_axes {axes!r} is not a prefix of the result's structure")


def _batch_at(plain: Tensor, axis: int) -> Tensor:
    """[B, ...] with its batch axis moved to `axis` (negative counts from the end, as numpy's moveaxis)."""
    n = plain.ndim
    if not -n <= axis < n:
        raise ValueError(f"vmap: out_axes {axis} is out of range for a result of {n} axes (the batch included)")
    axis %= n
    if axis == 0:
        return plain
    return _vtape.transpose(plain, list(range(1, axis + 1)) + [0] + list(range(axis + 1, n)))


_PLAIN_UNLESS_BATCHED = object()


def vmap(f: Callable, in_axes=0, out_axes=_PLAIN_UNLESS_BATCHED, axis_size: int | None = None) -> Callable:
    """vmap(f, in_axes, out_axes)(*args): f mapped over an axis of its arguments, as one batched call of every op.
    in_axes: an int or None (not mapped) for every argument, or one per argument (an int, None or a pytree of the
    argument's structure). out_axes: where the batch goes in the results: by default at axis 0 as plain [B, ...]
    arrays (JAX's default), or kept batched when a mapped argument is a batch already (vtape.as_batch); an int puts
    it there, vtape.batched keeps the results batched, None returns a result that does not depend on the mapped
    arguments as it is (an error where it does), and a pytree that is a prefix of the results' structure gives each
    part its own. Arguments that are not arrays (functions, strings) pass through where in_axes is None. axis_size
    gives the size where no argument is mapped (each result repeated), and is checked against the mapped axes."""
    return _Vmapped(f, in_axes, out_axes, axis_size)


class Jitted:
    """jit(f): f traced once per argument structure, shapes and dtypes, then run as a plan with the GIL released.
    jit(vmap(f)) maps its mapped arguments as batches, so a new batch size never traces again."""

    def __init__(self, f: Callable, passes: str = ""):
        functools.update_wrapper(self, f, updated=())  # the name and docstring, not f's attributes
        self.f = f
        self.passes = passes
        self._plans: dict = {}  # by the arguments' structure: one plan cache each

    def _prepare(self, args):
        f = self.f
        flat, defs, starts, rebuild = _flatten_args(args)
        unbatch = False
        if isinstance(f, _Vmapped) and (f.out_axes is _PLAIN_UNLESS_BATCHED or f.out_axes == 0):
            # The mapped arguments as batches, the results kept batched and unbatched after the plan: the batch size
            # never enters the trace.
            axes = f.leaf_axes(args, defs)
            already = any(a == 0 and x.is_batched for x, a in zip(flat, axes))  # batches in: batches out
            if all(a in (0, None) for a in axes) and any(a == 0 for a in axes) and not already:
                flat = [x if a is None else _vtape.as_batch(x) for x, a in zip(flat, axes)]
                inner, unbatch = f, True
                f = lambda *a: inner(*a, out_axes=batched)  # noqa: E731
        key = tuple(defs)
        cache = self._plans.get(key)
        if cache is None:
            cache = self._plans[key] = _vtape.Jitted(self.passes)

        def tracer(xs):
            leaves, d = tree_flatten(f(*rebuild(xs)))
            return _tensor_leaves(leaves), d

        return f, flat, rebuild, cache, tracer, unbatch

    def __call__(self, *args, **kwargs):
        if kwargs:  # traced as the positional arguments they stand for, as JAX's
            args = _positional(self.f, args, kwargs, "jit")
        f, flat, rebuild, cache, tracer, unbatch = self._prepare(args)
        done = cache.call(flat, tracer)
        if done is None:  # inside a trace or a transform: op by op
            return f(*rebuild(flat)) if not unbatch else _unbatch_tree(f(*rebuild(flat)))
        outs, d = done
        if unbatch:
            outs = [_vtape.unbatch(o) if o.is_batched else o for o in outs]
        return tree_unflatten(d, outs)

    def compile(self, *args) -> dict:
        """Traces and plans for these arguments without running: the plan's summary."""
        _, flat, _, cache, tracer, _ = self._prepare(args)
        return cache.compile(flat, tracer)

    def explain(self, *args) -> str:
        """The plan these arguments run, one line per step (as the C++ Jitted::explain)."""
        _, flat, _, cache, tracer, _ = self._prepare(args)
        return cache.explain(flat, tracer)

    def counters(self) -> dict:
        """Calls, traces, cache hits and trace and plan times, summed over the argument structures seen."""
        total: dict = {}
        for cache in self._plans.values():
            for k, v in cache.counters().items():
                total[k] = total.get(k, 0) + v
        return total


def _unbatch_tree(tree):
    leaves, d = tree_flatten(tree)
    return tree_unflatten(d, [_vtape.unbatch(x) if isinstance(x, Tensor) and x.is_batched else x for x in leaves])


def _positional(f: Callable, args: tuple, kwargs: dict, name: str) -> tuple:
    """args and kwargs as f's positional arguments (keyword arguments named as f's parameters)."""
    target = f.f if isinstance(f, (_Vmapped, Jitted)) else f
    try:
        bound = inspect.signature(target).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: keyword arguments {sorted(kwargs)} do not fit the function's parameters: {e}") from e
    if bound.kwargs:
        raise TypeError(f"{name}: keyword arguments {sorted(bound.kwargs)} cannot be passed by position (they follow a "
                        "parameter left to its default, or are keyword-only); pass them by position")
    return bound.args


class _StaticJitted:
    """jit(f, static_argnums=, static_argnames=): one Jitted per value of the static arguments (which must be
    hashable), each tracing f with them bound as Python values."""

    def __init__(self, f: Callable, passes: str, static_argnums, static_argnames):
        functools.update_wrapper(self, f, updated=())
        self.f, self.passes = f, passes
        self.signature = inspect.signature(f)
        params = list(self.signature.parameters)
        nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums or ())
        names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames or ())
        for n in nums:
            if not -len(params) <= n < len(params):
                raise ValueError(f"jit: static_argnums {n} is out of range for {len(params)} parameters")
        self.static = set(names) | {params[n] for n in nums}
        self._jitted: dict = {}

    def __call__(self, *args, **kwargs):
        bound = self.signature.bind(*args, **kwargs)
        static = {k: v for k, v in bound.arguments.items() if k in self.static}
        dynamic = [(k, v) for k, v in bound.arguments.items() if k not in self.static]
        try:
            key = (tuple(sorted(static.items())), tuple(k for k, _ in dynamic))
            hash(key)
        except TypeError as e:
            raise TypeError(f"jit: static arguments must be hashable, got {static!r}") from e
        jitted = self._jitted.get(key)
        if jitted is None:
            names, order, f, signature = [k for k, _ in dynamic], list(bound.arguments), self.f, self.signature

            def call(*values):  # f called as it was: positional, *args and **kwargs parameters kept
                arguments = {**static, **dict(zip(names, values))}
                again = inspect.BoundArguments(signature, {k: arguments[k] for k in order})
                return f(*again.args, **again.kwargs)

            jitted = self._jitted[key] = Jitted(call, self.passes)
        return jitted(*[v for _, v in dynamic])

    def counters(self) -> dict:
        """As Jitted.counters, summed over the static values seen."""
        total: dict = {}
        for j in self._jitted.values():
            for k, v in j.counters().items():
                total[k] = total.get(k, 0) + v
        return total


def jit(f: Callable | None = None, *, passes: str = "", static_argnums=(), static_argnames=()):
    """jit(f) or @jit: see Jitted. `passes` turns plan passes off ("-name") or on ("+name"), as JitOptions.
    static_argnums and static_argnames name arguments that are Python values (hashable), not traced: each value of
    them traces f once, as JAX's."""
    if f is None:
        return lambda g: jit(g, passes=passes, static_argnums=static_argnums, static_argnames=static_argnames)
    if not callable(f):
        raise TypeError(f"jit: expected a callable, got {f!r}")
    if static_argnums not in (None, (), []) or static_argnames not in (None, (), [], ""):
        return _StaticJitted(f, passes, static_argnums, static_argnames)
    return Jitted(f, passes)
