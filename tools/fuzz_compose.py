#!/usr/bin/env python3
"""tools/fuzz_compose.py: vtape's composition fuzzer (issue 45). It generates random Python programs over vtape's
Python API where loops, cond, closures and transforms meet, runs each in a worker process (a crash is caught and
reported with its repro) and checks it against these oracles:

  - jit: the stack with its jit layers equals the stack without them, on the first (tracing) and second (cached) call;
    the bare program jitted equals it eager;
  - vmap: the stack with vmap layers equals it with each vmap replaced by a Python loop over the examples;
  - unroll: the program with its loops, conds and vmaps (scan, fori_loop, while_loop, cond, vmap, jit inside it)
    equals the same program with each replaced by its definition in Python (the same body applied in a Python loop,
    an if, a list of examples, a plain call), under the same stack (jit removed, vmaps as loops);
  - fd: every derivative layer of the stack (grad, value_and_grad, jvp, vjp, jacfwd, jacrev, hessian, hvp) against
    central differences of the layers inside it (second differences for hessian and hvp), on the unrolled program;
  - batched: no result of a function of plain arrays is a batched tensor;
  - jax (--jax): the same program source run against jax / jax.numpy / jax.lax (a namespace `vt` mapping vtape's names
    to JAX's), under the same stack, equals vtape's.

The only outcomes accepted from vtape are a correct result or, for a form vtape documents as unsupported (reverse mode
through while_loop, which JAX refuses too), a clean vtape.Error/TypeError. Each failure is printed with its seed and
written to --repro-dir as a runnable script (the program as source, then the failing check), reduced by removing what
the failure does not need (--no-reduce keeps the program as generated).

  tools/fuzz_compose.py [--count N] [--seed S] [--jax | --no-jax] [--jobs J] [--timeout SECONDS]
                        [--repro-dir DIR] [--no-reduce] [--show SEED]

Program seeds are S, S+1, ..., S+N-1; `--count 1 --seed K` reruns program K and `--show K` prints it. vtape is
imported from the environment (PYTHONPATH=build/python for the build tree). The test suite runs a fixed budget of
programs without JAX (python/tests/test_fuzz_compose.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import selectors
import subprocess
import sys
import time
import traceback

# ================================================================================================ the program generator

SHAPES = [(), (1,), (2,), (3,), (4,), (2, 2), (2, 3)]
CARRY_SHAPES = [(), (), (1,), (2,), (3,), (2, 2)]
REVERSE_LAYERS = {"grad", "value_and_grad", "vjp", "jacrev", "hessian", "hvp"}
ORDER = {"grad": 1, "value_and_grad": 1, "vjp": 1, "jvp": 1, "jacfwd": 1, "jacrev": 1, "hessian": 2, "hvp": 2}


def prod(shape) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def shape_lit(shape) -> str:
    return "(" + "".join(f"{s}, " for s in shape).rstrip(" ") + ")" if len(shape) != 1 else f"({shape[0]},)"


def is_name(e: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", e) is not None


def paren(e: str) -> str:
    return e if is_name(e) or (e.startswith("(") and e.endswith(")") and balanced_outer(e)) else f"({e})"


def balanced_outer(e: str) -> bool:
    depth = 0
    for k, ch in enumerate(e):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and k < len(e) - 1:
            return False
    return True


def array_lit(values, shape) -> str:
    """numpy source for an array of `shape` holding `values` (row-major)."""
    if shape == ():
        return f"np.array({values[0]!r})"

    def nest(vals, shp):
        if len(shp) == 1:
            return "[" + ", ".join(repr(v) for v in vals) + "]"
        n = prod(shp[1:])
        return "[" + ", ".join(nest(vals[i * n : (i + 1) * n], shp[1:]) for i in range(shp[0])) + "]"

    if prod(shape) == 0:
        return f"np.zeros({shape_lit(shape)})"
    return f"np.array({nest(values, shape)})"


class V:
    """A float64 tensor variable the generated program can read: its name, shape and where it was defined."""

    __slots__ = ("name", "shape", "kind", "level", "weight")

    def __init__(self, name: str, shape: tuple, kind: str, level: int, weight: float = 1.0):
        self.name, self.shape, self.kind, self.level, self.weight = name, tuple(shape), kind, level, weight


class R:
    """Rendering options: mode "loop" (the program as written) or "plain" (loops, conds, vmaps and jits inside it
    replaced by their Python definitions), and the statements replaced by constants (the reducer's)."""

    def __init__(self, mode: str, stub=frozenset()):
        self.mode, self.stub = mode, stub


def tup(xs) -> str:
    xs = list(xs)
    return xs[0] if len(xs) == 1 else "(" + ", ".join(xs) + ")"


KEYS = "abcd"


def pack(items, struct) -> str:
    """A loop carry's source: a tensor, a tuple, a dict or a list of them."""
    items = list(items)
    if struct == "dict":
        return "{" + ", ".join(f"{KEYS[k]!r}: {x}" for k, x in enumerate(items)) + "}"
    if struct == "list":
        return "[" + ", ".join(items) + "]"
    return tup(items)


def unpacked(name: str, n: int, struct) -> str:
    """The right-hand side that unpacks carry `name` of n leaves into names."""
    return ", ".join(f"{name}[{KEYS[k]!r}]" for k in range(n)) if struct == "dict" else name


def assign_carry(ind: str, names, src: str, struct, tmp: str) -> list:
    names = list(names)
    if struct == "dict":
        return [f"{ind}{tmp} = {src}", f"{ind}{', '.join(names)} = {unpacked(tmp, len(names), struct)}"]
    return [f"{ind}{tup(names)} = {src}"]


class Fn:
    """A nested function: def name(params): unpacking, statements, return."""

    def __init__(self, name: str, params: list, unpack: list, stmts: list, ret: str, pre: list = ()):
        self.name, self.params, self.unpack, self.stmts, self.ret, self.pre = name, params, unpack, stmts, ret, list(pre)

    def render(self, r: R, ind: str) -> list:
        lines = [f"{ind}def {self.name}({', '.join(self.params)}):"]
        inner = ind + "    "
        lines += [inner + p for p in self.pre]
        for lhs, rhs in self.unpack:
            lines.append(f"{inner}{', '.join(lhs)} = {rhs}")
        for s in self.stmts:
            lines += s.render(r, inner)
        lines.append(f"{inner}return {self.ret}")
        return lines


class Stmt:
    sid = -1
    outs: list = []

    def render(self, r: R, ind: str) -> list:
        if self.sid in r.stub:
            return [f"{ind}{v.name} = vt.full({shape_lit(v.shape)}, 0.5)" for v in self.outs]
        return self.emit(r, ind)

    def fns(self) -> list:
        return []

    def children(self) -> list:
        return [s for f in self.fns() for s in f.stmts]


class Assign(Stmt):
    def __init__(self, out: V, expr: str):
        self.outs, self.expr = [out], expr

    def emit(self, r, ind):
        return [f"{ind}{self.outs[0].name} = {self.expr}"]


class Dead(Stmt):
    """An expression whose value is never used (a read of a closed-over value, a dead computation)."""

    def __init__(self, expr: str):
        self.outs, self.expr = [], expr

    def emit(self, r, ind):
        return [f"{ind}{self.expr}"]


class Scan(Stmt):
    def __init__(self, sid, fn, inits, carry_outs, xs, T, reverse, ys, yshape, struct=None, ckpt=0):
        self.sid, self.fn, self.inits, self.carry_outs, self.xs, self.T = sid, fn, inits, carry_outs, xs, T
        self.reverse, self.ys, self.yshape, self.struct, self.ckpt = reverse, ys, yshape, struct, ckpt
        self.outs = list(carry_outs) + ([ys] if ys is not None else [])

    def fns(self):
        return [self.fn]

    def emit(self, r, ind):
        s = self.sid
        lines = self.fn.render(r, ind)
        init = pack(self.inits, self.struct)
        names = [v.name for v in self.carry_outs]
        ys = self.ys.name if self.ys is not None else f"_ys{s}"
        xs = "None" if not self.xs else tup(self.xs) if len(self.xs) > 1 else self.xs[0]
        if r.mode == "loop":
            args = f"{self.fn.name}, {init}, {xs}"
            if not self.xs:
                args += f", length={self.T}"
            if self.reverse:
                args += ", reverse=True"
            if self.ckpt:
                args += f", checkpoint_every={self.ckpt}"
            lines.append(f"{ind}_r{s} = vt.scan({args})")
            lines += assign_carry(ind, names, f"_r{s}[0]", self.struct, f"_o{s}")
            lines.append(f"{ind}{ys} = _r{s}[1]")
            return lines
        lines.append(f"{ind}_c{s} = {init}")
        if self.xs:
            lines.append(f"{ind}_xs{s} = {xs}")
        lines.append(f"{ind}_y{s} = []")
        order = f"reversed(range({self.T}))" if self.reverse else f"range({self.T})"
        if not self.xs:
            row = "None"
        elif len(self.xs) == 1:
            row = f"_xs{s}[_t{s}]"
        else:
            row = "(" + ", ".join(f"_xs{s}[{k}][_t{s}]" for k in range(len(self.xs))) + ")"
        lines.append(f"{ind}for _t{s} in {order}:")
        lines.append(f"{ind}    _c{s}, _yt{s} = {self.fn.name}(_c{s}, {row})")
        lines.append(f"{ind}    _y{s}.append(_yt{s})")
        if self.reverse:
            lines.append(f"{ind}_y{s}.reverse()")
        lines += assign_carry(ind, names, f"_c{s}", self.struct, f"_o{s}")
        if self.ys is not None:
            lines.append(f"{ind}{ys} = vt.stack(_y{s}, 0) if _y{s} else vt.zeros({shape_lit((0,) + self.yshape)})")
        return lines


class Fori(Stmt):
    def __init__(self, sid, fn, inits, outs, lo, hi, struct=None):
        self.sid, self.fn, self.inits, self.outs, self.lo, self.hi = sid, fn, inits, list(outs), lo, hi
        self.struct = struct

    def fns(self):
        return [self.fn]

    def emit(self, r, ind):
        s = self.sid
        lines = self.fn.render(r, ind)
        names = [v.name for v in self.outs]
        init = pack(self.inits, self.struct)
        if r.mode == "loop":
            src = f"vt.fori_loop({self.lo}, {self.hi}, {self.fn.name}, {init})"
            return lines + assign_carry(ind, names, src, self.struct, f"_o{s}")
        lines.append(f"{ind}_c{s} = {init}")
        lines.append(f"{ind}for _i{s} in range({self.lo}, {self.hi}):")
        lines.append(f"{ind}    _c{s} = {self.fn.name}(vt.asarray(_i{s}), _c{s})")
        return lines + assign_carry(ind, names, f"_c{s}", self.struct, f"_o{s}")


class While(Stmt):
    def __init__(self, sid, cfn, bfn, inits, outs):
        self.sid, self.cfn, self.bfn, self.inits, self.outs = sid, cfn, bfn, inits, list(outs)

    def fns(self):
        return [self.cfn, self.bfn]

    def emit(self, r, ind):
        s = self.sid
        lines = self.cfn.render(r, ind) + self.bfn.render(r, ind)
        out = tup(v.name for v in self.outs)
        if r.mode == "loop":
            lines.append(f"{ind}{out} = vt.while_loop({self.cfn.name}, {self.bfn.name}, {tup(self.inits)})")
            return lines
        lines.append(f"{ind}_c{s} = {tup(self.inits)}")
        lines.append(f"{ind}while bool({self.cfn.name}(_c{s})):")
        lines.append(f"{ind}    _c{s} = {self.bfn.name}(_c{s})")
        lines.append(f"{ind}{out} = _c{s}")
        return lines


class Cond(Stmt):
    def __init__(self, sid, pred, tfn, ffn, operands, outs):
        self.sid, self.pred, self.tfn, self.ffn, self.operands, self.outs = sid, pred, tfn, ffn, operands, list(outs)

    def fns(self):
        return [self.tfn, self.ffn]

    def emit(self, r, ind):
        s = self.sid
        lines = self.tfn.render(r, ind) + self.ffn.render(r, ind)
        out = tup(v.name for v in self.outs)
        ops = "".join(", " + o for o in self.operands)
        if r.mode == "loop":
            lines.append(f"{ind}{out} = vt.cond({self.pred}, {self.tfn.name}, {self.ffn.name}{ops})")
            return lines
        lines.append(f"{ind}_p{s} = {self.pred}")
        lines.append(f"{ind}{out} = ({self.tfn.name} if bool(_p{s}) else {self.ffn.name})({', '.join(self.operands)})")
        return lines


class Deriv(Stmt):
    """A transform taken inside the program: grad, value_and_grad, jvp, vjp, jacfwd, jacrev or hessian of a nested
    function (which closes over outer values) at an argument."""

    def __init__(self, sid, kind, fn, arg, extra, outs):
        self.sid, self.kind, self.fn, self.arg, self.extra, self.outs = sid, kind, fn, arg, extra, list(outs)

    def fns(self):
        return [self.fn]

    def emit(self, r, ind):
        s, f = self.sid, self.fn.name
        lines = self.fn.render(r, ind)
        out = ", ".join(v.name for v in self.outs)
        if self.kind == "jvp":
            lines.append(f"{ind}{out} = vt.jvp({f}, ({self.arg},), ({self.extra},))")
        elif self.kind == "vjp":
            lines.append(f"{ind}_o{s}, _pb{s} = vt.vjp({f}, {self.arg})")
            lines.append(f"{ind}{out} = _pb{s}({self.extra})[0]")
        else:
            lines.append(f"{ind}{out} = vt.{self.kind}({f})({self.arg})")
        return lines


class Vmap(Stmt):
    def __init__(self, sid, fn, mapped, B, in_axis, unmapped, out_axis, out, row_out_shape):
        self.sid, self.fn, self.mapped, self.B, self.in_axis = sid, fn, mapped, B, in_axis
        self.unmapped, self.out_axis, self.out, self.row_out_shape = unmapped, out_axis, out, row_out_shape
        self.outs = [out] if out is not None else []

    def fns(self):
        return [self.fn]

    def emit(self, r, ind):
        s = self.sid
        lines = self.fn.render(r, ind)
        lhs = f"{self.out.name} = " if self.out is not None else ""
        if r.mode == "loop":
            args = self.mapped + ("" if self.unmapped is None else f", {self.unmapped}")
            axes = str(self.in_axis) if self.unmapped is None else f"({self.in_axis}, None)"
            lines.append(f"{ind}{lhs}vt.vmap({self.fn.name}, in_axes={axes}, out_axes={self.out_axis})({args})")
            return lines
        lines.append(f"{ind}_m{s} = {self.mapped}")
        row = f"_m{s}[_b{s}]" if self.in_axis == 0 else f"_m{s}[:, _b{s}]"
        extra = "" if self.unmapped is None else f", {self.unmapped}"
        lines.append(f"{ind}_v{s} = [{self.fn.name}({row}{extra}) for _b{s} in range({self.B})]")
        axis = self.out_axis if self.out_axis >= 0 else len(self.row_out_shape) + 1 + self.out_axis
        lines.append(f"{ind}{lhs}vt.stack(_v{s}, {axis})")
        return lines


class JitCall(Stmt):
    def __init__(self, sid, fn, arg, out):
        self.sid, self.fn, self.arg, self.outs = sid, fn, arg, [out]

    def fns(self):
        return [self.fn]

    def emit(self, r, ind):
        lines = self.fn.render(r, ind)
        call = f"vt.jit({self.fn.name})" if r.mode == "loop" else self.fn.name
        lines.append(f"{ind}{self.outs[0].name} = {call}({self.arg})")
        return lines


class Ctx:
    def __init__(self, level=0, reverse=False, in_loop=False, in_vmap=False):
        self.level, self.reverse, self.in_loop, self.in_vmap = level, reverse, in_loop, in_vmap

    def inner(self, **kw):
        c = Ctx(self.level + 1, self.reverse, self.in_loop, self.in_vmap)
        for k, v in kw.items():
            setattr(c, k, v)
        return c


MAX_LEVEL = 3


class Gen:
    """Generates one program from a seed: F(p), p a float64 vector, returning a scalar or a vector."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.counter = 0
        self.consts: list = []  # (name, shape, values)
        self.features: set = set()
        self.while_under_reverse = False
        self.stmts_left = 0

    # ------------------------------------------------------------------------------------------ names and constants
    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def value(self) -> float:
        return round(self.rng.uniform(-1.0, 1.0), 2)

    def const(self, shape) -> str:
        if shape == ():
            return repr(round(self.rng.uniform(-0.9, 0.9), 2))
        name = self.fresh("K")
        self.consts.append((name, tuple(shape), [self.value() for _ in range(prod(shape))]))
        return name

    # ------------------------------------------------------------------------------------------ expressions
    def pick(self, scope, ctx, pred=None) -> V | None:
        cands = [v for v in scope if pred is None or pred(v)]
        if not cands:
            return None
        ws = []
        for v in cands:
            w = v.weight
            if v.level == ctx.level and v.kind in ("local", "carry", "x", "arg", "index"):
                w *= 3.0
            ws.append(w)
        return self.rng.choices(cands, ws)[0]

    def adapt(self, e: str, s: tuple, t: tuple) -> str:
        """An expression of shape t made from expression e of shape s (slices, reductions, reshapes, broadcasts)."""
        rng = self.rng
        s, t = tuple(s), tuple(t)
        if s == t:
            return e
        while len(s) > 2:  # a stack of ys, a Jacobian: one axis less
            e, s = (f"vt.sum({e}, 0)" if rng.random() < 0.5 else f"{paren(e)}[{rng.randrange(s[0])}]") \
                if s[0] else (f"vt.sum({e}, 0)"), s[1:]
            if s == t:
                return e
        if prod(s) == 0:
            e, s = f"vt.sum({e})", ()
            if t == ():
                return e
        if t == ():
            if len(s) == 1:
                return rng.choice([f"vt.sum({e})", f"vt.mean({e})", f"{paren(e)}[{rng.randrange(s[0])}]",
                                   f"vt.logsumexp({e})",
                                   f"vt.sum({paren(e)} * {paren(e)})" if is_name(e) else f"vt.sum({e})"])
            return rng.choice([f"vt.sum({e})", f"vt.mean({e})", f"{paren(e)}[{rng.randrange(s[0])}, {rng.randrange(s[1])}]"])
        if len(t) == 1:
            k = t[0]
            if s == ():
                return rng.choice([f"({paren(e)} * vt.ones(({k},)))", f"({paren(e)} * {self.const(t)})",
                                   f"({paren(e)} + {self.const(t)})"])
            if len(s) == 2:
                a, b = s
                opts = [(f"vt.sum({e}, 0)", (b,)), (f"vt.sum({e}, 1)", (a,)), (f"vt.reshape({e}, ({a * b},))", (a * b,)),
                        (f"{paren(e)}[{rng.randrange(a)}]", (b,)), (f"{paren(e)}[:, {rng.randrange(b)}]", (a,))]
                e, s = rng.choice(opts)
                if s == t:
                    return e
            a = s[0]
            if rng.random() < 0.12:
                self.features.add("gather")
                idx = ", ".join(str(rng.randrange(a)) for _ in range(k))
                return f"{paren(e)}[np.array([{idx}])]"
            if a > k and rng.random() < 0.75:
                if a >= 2 * k - 1 and k > 1 and rng.random() < 0.3:
                    return f"{paren(e)}[::2][0:{k}]" if (a + 1) // 2 >= k else f"{paren(e)}[0:{k}]"
                o = rng.randrange(a - k + 1)
                return f"{paren(e)}[{o}:{o + k}]"
            if a < k and rng.random() < 0.4:
                reps = -(-k // a)
                return f"vt.concatenate([{', '.join([e] * reps)}], 0)[0:{k}]" if is_name(e) else \
                    f"({paren(e)} @ {self.const((a, k))})"
            return f"({paren(e)} @ {self.const((a, k))})"
        c, d = t
        if len(s) == 2 and s == (d, c) and rng.random() < 0.5:
            return f"{paren(e)}.T"
        if prod(s) == c * d and rng.random() < 0.7:
            return f"vt.reshape({e}, ({c}, {d}))"
        if rng.random() < 0.5:
            return f"vt.reshape({self.adapt(e, s, (c * d,))}, ({c}, {d}))"
        u, w = self.adapt(e, s, (c,)), self.adapt(e, s, (d,))
        return f"(vt.reshape({u}, ({c}, 1)) * vt.reshape({w}, (1, {d})))"

    def leaf(self, scope, ctx, shape) -> str:
        if self.rng.random() < 0.08:
            return self.const(shape) if shape != () else f"vt.full((), {round(self.rng.uniform(-0.9, 0.9), 2)})"
        v = self.pick(scope, ctx)
        return self.adapt(v.name, v.shape, shape)

    def unary(self, e: str, kinks: bool) -> str:
        rng = self.rng
        smooth = [
            lambda e: f"vt.sin({e})", lambda e: f"vt.cos({e})", lambda e: f"vt.tanh({e})",
            lambda e: f"vt.sigmoid({e})", lambda e: f"vt.exp(vt.tanh({e}))", lambda e: f"(0.5 * {paren(e)})",
            lambda e: f"({paren(e)} * 0.7 + 0.1)", lambda e: f"vt.softplus({e})", lambda e: f"vt.square(vt.tanh({e}))",
            lambda e: f"vt.erf({e})", lambda e: f"vt.log1p(vt.square({e}))", lambda e: f"vt.sqrt(vt.square({e}) + 0.5)",
            lambda e: f"({paren(e)} / (1.0 + vt.square({e})))",
        ]
        kinky = [lambda e: f"vt.abs({e})", lambda e: f"vt.maximum({e}, 0.1)", lambda e: f"vt.clip({e}, -0.4, 0.6)"]
        if kinks and rng.random() < 0.06:
            self.features.add("kink")
            return rng.choice(kinky)(e)
        return rng.choice(smooth)(e)

    def expr(self, scope, ctx, shape, depth=2) -> str:
        rng = self.rng
        r = rng.random()
        if depth <= 0 or r < 0.3:
            return self.leaf(scope, ctx, shape)
        if r < 0.62:
            if len(shape) == 1 and rng.random() < 0.08:
                return f"vt.cumsum({self.expr(scope, ctx, shape, depth - 1)}, 0)"
            return self.unary(self.expr(scope, ctx, shape, depth - 1), True)
        if r < 0.66 and shape != ():
            self.features.add("where")
            c = self.expr(scope, ctx, (), 0)
            return f"vt.where({paren(c)} > {round(rng.uniform(-0.5, 0.5), 2)}, {self.expr(scope, ctx, shape, depth - 1)}, " \
                   f"{self.expr(scope, ctx, shape, depth - 1)})"
        a = self.expr(scope, ctx, shape, depth - 1)
        b = self.expr(scope, ctx, shape if rng.random() < 0.6 else (), depth - 1)
        op = rng.choice(["+", "-", "*", "*"])
        return f"({a} {op} {b})"

    def scalar_pred(self, scope, ctx) -> str:
        s = self.expr(scope, ctx, (), 1)
        return f"vt.sin({s}) < {round(self.rng.uniform(-0.6, 0.6), 2)}"

    # ------------------------------------------------------------------------------------------ statements
    def block(self, scope, ctx, n) -> list:
        out = []
        for _ in range(n):
            if self.stmts_left <= 0:
                break
            self.stmts_left -= 1
            out.append(self.numbered(self.stmt(scope, ctx)))
        return out

    def numbered(self, s: Stmt) -> Stmt:
        if s.sid < 0:
            s.sid = int(self.fresh(""))
        return s

    def stmt(self, scope, ctx) -> Stmt:
        rng = self.rng
        deep = ctx.level < MAX_LEVEL
        w = {"assign": 2.0, "dead": 0.5}
        if deep:
            top = ctx.level == 0
            w.update(scan=3.0 if top else 1.0, fori=2.0 if top else 0.8,
                     while_=(1.2 if top else 0.5) * (0.1 if ctx.reverse else 1.0),
                     cond=2.0, vmap=2.0, deriv=1.5 if top else 3.5, jit=0.5)
        kind = rng.choices(list(w), list(w.values()))[0]
        return getattr(self, "gen_" + kind)(scope, ctx)

    def add(self, scope, ctx, shape, kind="local", weight=1.0, prefix="v") -> V:
        v = V(self.fresh(prefix), shape, kind, ctx.level, weight)
        scope.append(v)
        return v

    def gen_assign(self, scope, ctx):
        shape = self.rng.choice(SHAPES)
        e = self.expr(scope, ctx, shape)
        return Assign(self.add(scope, ctx, shape), e)

    def gen_dead(self, scope, ctx):
        outer = [v for v in scope if v.level < ctx.level or v.kind == "param"]
        v = self.rng.choice(outer) if outer and self.rng.random() < 0.8 else self.pick(scope, ctx)
        self.features.add("dead-read")
        if ctx.level > 0 and v.level < ctx.level:
            self.features.add("dead-read-of-closure")
        return Dead(self.adapt(v.name, v.shape, self.rng.choice([(), (1,), (2,), (2, 2)])))

    def carries(self, scope, ctx, inner, n):
        """n carry variables for a loop body (in `inner`'s scope) and their initial values (from `scope`)."""
        shapes = [self.rng.choice(CARRY_SHAPES) for _ in range(n)]
        inits = [self.expr(scope, ctx, s, 1) for s in shapes]
        cs = [V(self.fresh("c"), s, "carry", ctx.level + 1, 1.5) for s in shapes]
        return cs, inits

    def update(self, scope, ctx, c: V) -> str:
        """The next value of carry c: a contraction toward a body value, a gradient step, or a closed-over value."""
        rng = self.rng
        r = rng.random()
        closed = [v for v in scope if v.shape == c.shape and v.level < ctx.level and v.kind != "const"]
        if r < 0.08 and closed:
            self.features.add("carry-is-closure")
            return rng.choice(closed).name
        if r < 0.11:
            return c.name
        grads = [v for v in scope if v.kind == "deriv" and v.level == ctx.level]
        if grads and r < 0.5:
            g = rng.choice(grads)
            return f"{c.name} - 0.1 * {paren(self.adapt(g.name, g.shape, c.shape))}"
        a, b = rng.choice([(0.5, 0.5), (0.8, 0.3), (0.9, 0.2)])
        return f"{a} * {c.name} + {b} * vt.tanh({self.expr(scope, ctx, c.shape)})"

    def gen_scan(self, scope, ctx):
        rng, sid = self.rng, self.fresh("")
        sid = int(sid)
        inner_ctx = ctx.inner(in_loop=True)
        body = list(scope)
        cs, inits = self.carries(scope, ctx, body, rng.choice([1, 1, 2]))
        body += cs
        T = rng.choices([0, 1, 2, 3, 4], [0.05, 0.3, 0.3, 0.2, 0.15])[0]
        nxs = rng.choices([0, 1, 2], [0.4, 0.45, 0.15])[0]
        xs, xvars = [], []
        for _ in range(nxs):
            row = rng.choice([(), (1,), (2,), (3,)])
            if T == 0:
                xs.append(f"vt.zeros({shape_lit((0,) + row)})")
            else:
                xs.append(self.expr(scope, ctx, (T,) + row, 1))
            xvars.append(V(self.fresh("x"), row, "x", ctx.level + 1, 1.2))
        if T == 0:
            self.features.add("scan-of-no-steps")
        body += xvars
        self.features.add("scan")
        if ctx.level > 0:
            self.features.add("nested-loop")
        stmts = self.block(body, inner_ctx, rng.choice([1, 1, 2, 3]))
        upd = [self.update(body, inner_ctx, c) for c in cs]
        # y: None, a body value, a closed-over value returned as it is, or the carry
        r = rng.random()
        closed = [v for v in scope if v.kind != "const"]
        if r < 0.25:
            y, yshape = "None", None
        elif r < 0.45 and closed:
            v = rng.choice(closed)
            y, yshape = v.name, v.shape
            self.features.add("y-is-closure")
        elif r < 0.55:
            y, yshape = cs[0].name, cs[0].shape
        else:
            yshape = rng.choice([(), (2,), (3,)])
            y = self.expr(body, inner_ctx, yshape)
        struct = None if len(cs) == 1 else rng.choice([None, None, "dict", "list"])
        if struct:
            self.features.add(f"{struct}-carry")
        cname = cs[0].name if len(cs) == 1 else f"c{sid}"
        unpack = [] if len(cs) == 1 else [([c.name for c in cs], unpacked(cname, len(cs), struct))]
        if nxs == 0:
            xname = f"_x{sid}"
        elif nxs == 1:
            xname = xvars[0].name
        else:
            xname = f"x{sid}"
            unpack.append(([x.name for x in xvars], xname))
        fn = Fn(f"body{sid}", [cname, xname], unpack, stmts, f"{pack(upd, struct)}, {y}")
        outs = [self.add(scope, ctx, c.shape, weight=3.0) for c in cs]
        ys = self.add(scope, ctx, (T,) + yshape, weight=2.5) if yshape is not None else None
        ckpt = rng.choice([1, 2]) if T > 1 and rng.random() < 0.15 else 0
        if ckpt:
            self.features.add("scan-checkpoint")
        return Scan(sid, fn, inits, outs, xs, T, rng.random() < 0.15, ys, yshape, struct, ckpt)

    def gen_fori(self, scope, ctx):
        rng, sid = self.rng, int(self.fresh(""))
        inner_ctx = ctx.inner(in_loop=True)
        body = list(scope)
        cs, inits = self.carries(scope, ctx, body, rng.choice([1, 1, 2]))
        body += cs
        pre = []
        if rng.random() < 0.6:
            fi = V(f"fi{sid}", (), "index", ctx.level + 1, 1.0)
            body.append(fi)
            pre = [f"{fi.name} = vt.astype(i{sid}, vt.float64)"]
        self.features.add("fori_loop")
        if ctx.level > 0:
            self.features.add("nested-loop")
        stmts = self.block(body, inner_ctx, rng.choice([1, 1, 2, 3]))
        upd = [self.update(body, inner_ctx, c) for c in cs]
        struct = None if len(cs) == 1 else rng.choice([None, None, "dict", "list"])
        if struct:
            self.features.add(f"{struct}-carry")
        cname = cs[0].name if len(cs) == 1 else f"c{sid}"
        unpack = [] if len(cs) == 1 else [([c.name for c in cs], unpacked(cname, len(cs), struct))]
        fn = Fn(f"body{sid}", [f"i{sid}", cname], unpack, stmts, pack(upd, struct), pre)
        lo = rng.choice([0, 0, 1, 2])
        hi = lo + rng.choices([0, 1, 2, 3], [0.05, 0.35, 0.35, 0.25])[0]
        outs = [self.add(scope, ctx, c.shape, weight=3.0) for c in cs]
        return Fori(sid, fn, inits, outs, lo, hi, struct)

    def gen_while_(self, scope, ctx):
        rng, sid = self.rng, int(self.fresh(""))
        inner_ctx = ctx.inner(in_loop=True)
        if ctx.reverse:
            self.while_under_reverse = True
        body = list(scope)
        k = V(f"k{sid}", (), "counter", ctx.level + 1, 0.3)
        cs, inits = self.carries(scope, ctx, body, rng.choice([1, 1, 2]))
        body += [k] + cs
        self.features.add("while_loop")
        N = rng.choices([0, 1, 2, 3], [0.05, 0.35, 0.35, 0.25])[0]
        pred = f"{k.name} < {N}.0"
        if rng.random() < 0.35:
            self.features.add("while-data-dependent")
            s = self.expr(body, inner_ctx, (), 1)
            pred = f"({pred}) * (vt.sin({s}) < {round(rng.uniform(-0.3, 0.9), 2)})"
        names = [k.name] + [c.name for c in cs]
        cfn = Fn(f"wcond{sid}", [f"c{sid}"], [(names, f"c{sid}")], [], pred)
        stmts = self.block(body, inner_ctx, rng.choice([1, 1, 2]))
        upd = [f"{k.name} + 1.0"] + [self.update(body, inner_ctx, c) for c in cs]
        bfn = Fn(f"wbody{sid}", [f"c{sid}"], [(names, f"c{sid}")], stmts, tup(upd))
        outs = [self.add(scope, ctx, (), weight=0.5)] + [self.add(scope, ctx, c.shape, weight=3.0) for c in cs]
        return While(sid, cfn, bfn, ["vt.zeros(())"] + inits, outs)

    def gen_cond(self, scope, ctx):
        rng, sid = self.rng, int(self.fresh(""))
        self.features.add("cond")
        if rng.random() < 0.35:
            # a guard: the branch not taken is not finite where the predicate holds (sqrt or log of a negative)
            self.features.add("cond-guard")
            a = self.expr(scope, ctx, (), 1)
            c = round(rng.uniform(-0.5, 0.5), 2)
            y = V(f"a{sid}", (), "arg", ctx.level + 1, 2.0)
            inner = ctx.inner()
            body = list(scope) + [y]
            safe = self.expr(body, inner, (), 1)
            unsafe = rng.choice([f"vt.sqrt({y.name} - {c})", f"vt.log({y.name} - {c})",
                                 f"vt.sqrt({y.name} - {c}) * {paren(self.expr(body, inner, (), 0))}"])
            tfn = Fn(f"tb{sid}", [y.name], [], [], f"{paren(safe)} * 0.5 + 0.1 * {y.name}")
            ffn = Fn(f"fb{sid}", [y.name], [], [], unsafe)
            out = self.add(scope, ctx, (), weight=3.0)
            return Cond(sid, f"{paren(a)} < {c}", tfn, ffn, [a], [out])
        pred = self.scalar_pred(scope, ctx)
        nops = rng.choice([0, 1, 1, 2])
        ops, params = [], []
        for _ in range(nops):
            s = rng.choice([(), (2,), (3,)])
            ops.append(self.expr(scope, ctx, s, 1))
            params.append(V(self.fresh("o"), s, "arg", ctx.level + 1, 2.0))
        shapes = [rng.choice([(), (2,), (3,)]) for _ in range(rng.choice([1, 1, 2]))]
        fns = []
        for tag in ("tb", "fb"):
            body = list(scope) + params
            inner = ctx.inner()
            stmts = self.block(body, inner, rng.choice([0, 0, 1, 2]))
            rets = []
            for s in shapes:
                closed = [v for v in scope if v.shape == s and v.kind != "const"]
                if closed and rng.random() < 0.15:
                    self.features.add("branch-returns-closure")
                    rets.append(rng.choice(closed).name)
                else:
                    rets.append(self.expr(body, inner, s))
            fns.append(Fn(f"{tag}{sid}", [p.name for p in params], [], stmts, tup(rets)))
        outs = [self.add(scope, ctx, s, weight=3.0) for s in shapes]
        return Cond(sid, pred, fns[0], fns[1], ops, outs)

    def gen_deriv(self, scope, ctx):
        rng, sid = self.rng, int(self.fresh(""))
        kind = rng.choices(["grad", "jvp", "value_and_grad", "vjp", "jacfwd", "jacrev", "hessian"],
                           [4, 2, 1, 1, 1, 0.6, 0.4])[0]
        ashape = rng.choice([(), (2,), (3,)]) if kind != "hessian" else rng.choice([(2,), (3,)])
        # the argument: preferably a carry, an x, the parameter
        v = self.pick(scope, ctx, lambda v: v.kind in ("carry", "x", "param", "local", "arg"))
        arg = self.adapt(v.name, v.shape, ashape) if v is not None else self.expr(scope, ctx, ashape, 1)
        y = V(f"y{sid}", ashape, "arg", ctx.level + 1, 3.0)
        inner = ctx.inner(reverse=ctx.reverse or kind in REVERSE_LAYERS)
        body = list(scope) + [y]
        stmts = self.block(body, inner, rng.choices([0, 1, 2], [0.55, 0.3, 0.15])[0])
        if kind in ("grad", "value_and_grad", "hessian"):
            oshape = ()
        else:
            oshape = rng.choice([(), (2,)])
        # the result reads the argument and (mostly) something the function closes over
        ye = self.expr(body, inner, oshape, 1)
        if y.name not in ye:
            ye = f"({ye} + {self.unary(self.adapt(y.name, ashape, oshape), False)})"
        outer = [w for w in scope if w.kind != "const"]
        if outer and rng.random() < 0.85:
            w = self.pick(outer, ctx)
            ye = f"({ye} * {paren(self.unary(self.adapt(w.name, w.shape, oshape), False))})"
            self.features.add(f"{'loop-' if ctx.in_loop else ''}{kind}-of-closure")
        fn = Fn(f"fn{sid}", [y.name], [], stmts, ye)
        extra = None
        if kind == "jvp":
            extra = self.expr(scope, ctx, ashape, 0) if rng.random() < 0.4 else self.const(ashape) \
                if ashape != () else "vt.full((), 0.7)"
        elif kind == "vjp":
            extra = self.const(oshape) if oshape != () else "vt.full((), 1.3)"
        if ctx.in_loop:
            self.features.add(f"{kind}-in-loop")
        dshape = {"grad": [ashape], "value_and_grad": [(), ashape], "jvp": [oshape, oshape], "vjp": [ashape],
                  "jacfwd": [oshape + ashape], "jacrev": [oshape + ashape], "hessian": [ashape + ashape]}[kind]
        outs = [V(self.fresh("g"), s, "deriv", ctx.level, 3.0) for s in dshape]
        scope.extend(outs)
        return Deriv(sid, kind, fn, arg, extra, outs)

    def gen_vmap(self, scope, ctx):
        rng, sid = self.rng, int(self.fresh(""))
        B = rng.choice([1, 2, 3])
        row = rng.choice([(), (2,), (3,)])
        in_axis = 1 if row != () and rng.random() < 0.2 else 0
        mshape = (B,) + row if in_axis == 0 else (row[0], B)
        mapped = self.expr(scope, ctx, mshape, 1)
        r = V(f"r{sid}", row, "arg", ctx.level + 1, 3.0)
        params = [r]
        unmapped = None
        if rng.random() < 0.3:
            ushape = rng.choice([(), (2,)])
            unmapped = self.expr(scope, ctx, ushape, 1)
            params.append(V(f"u{sid}", ushape, "arg", ctx.level + 1, 1.5))
        inner = ctx.inner(in_vmap=True)
        body = list(scope) + params
        stmts = self.block(body, inner, rng.choices([0, 1, 2], [0.5, 0.35, 0.15])[0])
        oshape = rng.choice([(), (2,), (3,)])
        closed = [v for v in scope if v.shape == oshape and v.kind != "const"]
        if closed and rng.random() < 0.07:
            self.features.add("vmap-returns-closure")
            ret = rng.choice(closed).name
        else:
            ret = self.expr(body, inner, oshape)
        out_axis = rng.choices([0, -1, 1], [0.8, 0.1, 0.1 if oshape != () else 0])[0]
        fn = Fn(f"vf{sid}", [p.name for p in params], [], stmts, ret)
        self.features.add("vmap-in-loop" if ctx.in_loop else "vmap-in-program")
        if any(isinstance(s, (Scan, Fori, While, Cond)) for s in stmts):
            self.features.add("loop-in-vmap")
        if out_axis != 0:
            self.features.add("vmap-out_axes")
        if rng.random() < 0.15:
            self.features.add("dead-vmap")
            return Vmap(sid, fn, mapped, B, in_axis, unmapped, out_axis, None, oshape)
        oshp = list(oshape)
        pos = out_axis if out_axis >= 0 else len(oshape) + 1 + out_axis
        oshp.insert(pos, B)
        out = self.add(scope, ctx, tuple(oshp), weight=2.5)
        return Vmap(sid, fn, mapped, B, in_axis, unmapped, out_axis, out, oshape)

    def gen_jit(self, scope, ctx):
        rng, sid = self.rng, int(self.fresh(""))
        ashape = rng.choice([(), (2,), (3,)])
        arg = self.expr(scope, ctx, ashape, 1)
        a = V(f"j{sid}", ashape, "arg", ctx.level + 1, 3.0)
        inner = ctx.inner()
        body = list(scope) + [a]
        stmts = self.block(body, inner, rng.choice([0, 1, 1, 2]))
        oshape = rng.choice([(), (2,), (3,)])
        fn = Fn(f"jf{sid}", [a.name], [], stmts, self.expr(body, inner, oshape))
        self.features.add("jit-in-program")
        return JitCall(sid, fn, arg, self.add(scope, ctx, oshape, weight=2.0))

    # ------------------------------------------------------------------------------------------ the program
    def program(self, reverse: bool, base_shape: tuple, n: int):
        rng = self.rng
        self.stmts_left = rng.choice([3, 5, 7, 9, 12])
        scope = [V("p", (n,), "param", 0, 2.0)]
        ctx = Ctx(0, reverse)
        stmts = []
        while self.stmts_left > 0:
            self.stmts_left -= 1
            stmts.append(self.numbered(self.stmt(scope, ctx)))
            if isinstance(stmts[-1], Vmap) and rng.random() < 0.3 and self.stmts_left > 0:
                self.stmts_left -= 1
                stmts.append(self.numbered(self.gen_vmap(scope, ctx)))  # often of another batch size
        vms = [s for s in stmts if isinstance(s, Vmap)]
        if len({s.B for s in vms}) > 1:
            self.features.add("vmaps-of-two-sizes")
        # the result: a few terms, the loops' and transforms' results first
        terms = []
        for _ in range(rng.choice([1, 2, 2, 3])):
            v = self.pick(scope, ctx, lambda v: v.kind != "const")
            terms.append(self.adapt(v.name, v.shape, base_shape))
        return stmts, terms


class Program:
    """A generated program with its transform stack, rendered as source."""

    def __init__(self, seed: int, stub=(), drop_layers=(), drop_terms=()):
        self.seed = seed
        rng = random.Random(seed * 7919 + 17)
        self.n = rng.choice([2, 3, 4])
        base = rng.choice([(), (), (2,), (3,)])
        self.layers = gen_stack(rng, base, self.n)
        self.reverse = any(l["kind"] in REVERSE_LAYERS for l in self.layers)  # of the stack as generated
        self.layers = [l for k, l in enumerate(self.layers) if k not in set(drop_layers)]
        g = Gen(seed)
        self.stmts, self.terms = g.program(self.reverse, base, self.n)
        self.consts, self.features, self.while_under_reverse = g.consts, g.features, g.while_under_reverse
        self.base = base
        self.stub, self.drop_terms = frozenset(stub), frozenset(drop_terms)
        self.types = stack_types(self.layers, (self.n,), base)  # raises ValueError for a stack that does not fit
        crng = random.Random(seed * 104729 + 3)
        self.inputs = {}

        def arr(name, shape, scale=1.0):
            vals = [round(crng.uniform(-scale, scale), 6) for _ in range(prod(shape))]
            self.inputs[name] = array_lit(vals, shape)

        for k, (layer, (ins, _)) in enumerate(zip(self.layers, self.types)):
            inner_out = self.types[k - 1][1] if k else base
            if layer["kind"] in ("jvp", "hvp"):
                arr(f"TAN{k}", ins)
            elif layer["kind"] == "vjp":
                arr(f"COT{k}", inner_out)
            elif layer["kind"] == "sumw":
                arr(f"W{k}", inner_out)
        arr("P0", (self.n,))
        arr("X", self.types[-1][0] if self.layers else (self.n,))
        for k, layer in enumerate(self.layers):
            if layer["kind"] in ORDER:
                ins = self.types[k][0]
                arr(f"XF{k}", ins)
                arr(f"DF{k}", ins)
                if layer["kind"] == "hessian":
                    arr(f"EF{k}", ins)

    # ------------------------------------------------------------------------------------------ rendering
    def walk(self):
        """Every statement, outer first, with nested ones after their parent."""
        out = []

        def rec(ss):
            for s in ss:
                out.append(s)
                rec(s.children())

        rec(self.stmts)
        return out

    def render_f(self, name: str, mode: str) -> list:
        r = R(mode, self.stub)
        lines = [f"def {name}(p):"]
        if mode == "plain":
            lines.append("    p = vt.asarray(p)")
        for s in self.stmts:
            lines += s.render(r, "    ")
        terms = [t for k, t in enumerate(self.terms) if k not in self.drop_terms]
        if not terms:
            terms = [f"vt.full({shape_lit(self.base)}, 0.5) + 0.0 * vt.sum(p)"]
        lines.append(f"    return {' + '.join(terms)}")
        return lines

    def stack_lines(self, name: str, variant: str) -> list:
        """def name(f): the stack's layers applied to f, inner first. variant "full"; "nojit" without the jit layers;
        "loop" without them and with each vmap a Python loop (the function returns every level, for the fd checks)."""
        lines = [f"def {name}(f):", "    g0 = f"]
        k = 0
        for i, layer in enumerate(self.layers):
            kind, prev = layer["kind"], f"g{k}"
            if kind == "jit" and variant != "full":
                continue
            k += 1
            lines.append(f"    g{k} = {render_layer(layer, i, prev, variant)}")
        if variant == "loop":
            lines.append("    return [" + ", ".join(f"g{j}" for j in range(k + 1)) + "]")
        else:
            lines.append(f"    return g{k}")
        return lines

    def module(self) -> str:
        """The program's source: it reads `vt` and `np` from its namespace (the harness gives vtape or the JAX shim)."""
        out = [f"# vtape composition fuzzer, seed {self.seed}: {describe_stack(self.layers)} of a program with "
               f"{', '.join(sorted(self.features)) or 'no loops'}", "import numpy as np", ""]
        for name, shape, vals in self.consts:
            out.append(f"{name} = vt.asarray({array_lit(vals, shape)})")
        out.append("")
        out += self.render_f("F", "loop")
        out.append("")
        out += self.render_f("F_plain", "plain")
        out.append("")
        for name, lit in self.inputs.items():
            out.append(f"{name} = {lit}")
        out.append("")
        out += self.stack_lines("S_full", "full")
        out += self.stack_lines("S_nojit", "nojit")
        out += self.stack_lines("S_loop", "loop")
        return "\n".join(out) + "\n"

    def has(self, kind: str) -> bool:
        return any(l["kind"] == kind for l in self.layers)

    def checks(self, use_jax: bool):
        """The stages (name -> code that sets R_<name>) and the comparisons (a, b, rtol, oracle) for this program."""
        st = {
            "prog": "R_prog = F(P0)",
            "prog_plain": "R_prog_plain = F_plain(P0)",
            "prog_jit": "_jf = vt.jit(F)\nR_prog_jit = _jf(P0)",
            "prog_jit2": "R_prog_jit2 = _jf(P0)",
            "full": "_gf = S_full(F)\nR_full = _gf(X)",
        }
        cmp = [("prog", "prog_plain", 1e-9, "unroll"), ("prog_jit", "prog", 1e-9, "jit"),
               ("prog_jit2", "prog_jit", 1e-12, "jit-cached")]
        if self.has("jit"):
            st["full2"] = "R_full2 = _gf(X)"
            st["nojit"] = "R_nojit = S_nojit(F)(X)"
            cmp += [("full", "nojit", 1e-9, "jit"), ("full2", "full", 1e-12, "jit-cached")]
        top = "nojit" if self.has("jit") else "full"
        if self.has("vmap"):
            st["loop"] = "R_loop = S_loop(F)[-1](X)"
            cmp.append((top, "loop", 1e-9, "vmap"))
            top = "loop"
        st["plain"] = "R_plain = S_loop(F_plain)[-1](X)"
        cmp.append((top, "plain", 1e-8, "unroll"))
        lv = 0
        for k, layer in enumerate(self.layers):
            if layer["kind"] == "jit":
                continue
            lv += 1
            if layer["kind"] in ORDER:
                st[f"fd{k}"] = fd_code(layer, k, lv)
        if use_jax:
            cmp.append(("full", "jax", 1e-7, "jax"))
        return st, cmp


# ================================================================================================ transform stacks


def gen_stack(rng: random.Random, base: tuple, n: int) -> list:
    """A random stack of transforms around the program (outer first), typed so that each layer fits the function
    inside it: from the brief's list (grad∘jit, jit∘grad, vmap∘grad, jvp∘grad, vmap∘hessian, vmap∘vmap,
    value_and_grad, jacfwd/jacrev, ...) or drawn layer by layer."""
    templates = [[], ["jit"], ["grad"], ["grad", "jit"], ["jit", "grad"], ["vmap", "grad"], ["jvp", "grad"],
                 ["vmap", "hessian"], ["vmap", "vmap"], ["value_and_grad"], ["jit", "value_and_grad"],
                 ["jacfwd"], ["jacrev"], ["jit", "jacrev"], ["vmap", "jacfwd"], ["vmap"], ["jit", "vmap"],
                 ["vmap", "jit"], ["hessian"], ["jit", "hessian"], ["grad", "sumw", "vmap"],
                 ["jit", "grad", "sumw", "vmap"], ["hvp"], ["vjp"], ["jvp"], ["vmap", "jvp"], ["jacrev", "grad"],
                 ["vmap", "jit", "grad"], ["jit", "vmap", "grad"], ["vmap", "vmap", "grad"], ["jvp", "jit", "grad"],
                 ["vmap", "value_and_grad"], ["hvp", "jit"], ["vmap", "jvp", "grad"]]
    for _ in range(50):
        if rng.random() < 0.55:
            kinds = list(rng.choice(templates))
        else:
            kinds = [rng.choice(["jit", "vmap", "vmap", "grad", "grad", "jvp", "vjp", "jacfwd", "jacrev", "hessian",
                                 "value_and_grad", "hvp", "sumw"]) for _ in range(rng.choice([1, 2, 3, 4]))]
        layers = []
        for kind in reversed(kinds):  # inner first
            if kind == "vmap":
                layers.append({"kind": "vmap", "B": rng.choice([1, 2, 3]),
                               "in": rng.choices([0, 1, -1], [0.8, 0.1, 0.1])[0],
                               "out": rng.choices([0, 1, -1], [0.8, 0.1, 0.1])[0]})
            else:
                layers.append({"kind": kind})
        # a scalar where a layer needs one: a weighted sum first
        fixed, shape = [], base
        ok = True
        for layer in layers:
            if layer["kind"] in ("grad", "value_and_grad", "hessian", "hvp") and shape != ():
                fixed.append({"kind": "sumw"})
                shape = ()
            fixed.append(layer)
            try:
                _, shape = stack_types(fixed, (n,), base)[-1]
            except ValueError:
                ok = False
                break
        order = sum(ORDER.get(l["kind"], 0) for l in fixed)
        if ok and order <= 2 and sum(l["kind"] == "vmap" for l in fixed) <= 2:
            return fixed
    return []


def stack_types(layers: list, ins: tuple, out) -> list:
    """(input shape, output type) after each layer, inner first; an output type is a shape or ("pair", s, t)."""
    types = []
    for layer in layers:
        kind = layer["kind"]
        pair = isinstance(out, list)
        if kind == "jit":
            pass
        elif kind == "vmap":
            a = layer["in"] if layer["in"] >= 0 else len(ins) + 1 + layer["in"]
            if not 0 <= a <= len(ins):
                raise ValueError("in_axes")
            ins = ins[:a] + (layer["B"],) + ins[a:]
            leaves = out if pair else [out]
            new = []
            for s in leaves:
                o = layer["out"] if layer["out"] >= 0 else len(s) + 1 + layer["out"]
                if not 0 <= o <= len(s):
                    raise ValueError("out_axes")
                new.append(s[:o] + (layer["B"],) + s[o:])
            out = new if pair else new[0]
        elif pair:
            raise ValueError("a pair")
        elif kind in ("grad", "hvp"):
            if out != ():
                raise ValueError("not a scalar")
            out = ins
        elif kind == "value_and_grad":
            if out != ():
                raise ValueError("not a scalar")
            out = [(), ins]
        elif kind == "hessian":
            if out != ():
                raise ValueError("not a scalar")
            out = ins + ins
        elif kind in ("jacfwd", "jacrev"):
            out = out + ins
        elif kind == "jvp":
            pass
        elif kind == "vjp":
            out = ins
        elif kind == "sumw":
            out = ()
        if len(ins) > 3 or any(len(s) > 4 for s in (out if isinstance(out, list) else [out])):
            raise ValueError("too many axes")
        types.append((ins, out))
    return types


def render_layer(layer: dict, k: int, g: str, variant: str) -> str:
    kind = layer["kind"]
    if kind == "jit":
        return f"vt.jit({g})"
    if kind == "vmap":
        if variant == "loop":
            return f"loopmap({g}, {layer['in']}, {layer['out']}, {layer['B']})"
        return f"vt.vmap({g}, in_axes={layer['in']}, out_axes={layer['out']})"
    if kind in ("grad", "value_and_grad", "jacfwd", "jacrev", "hessian"):
        return f"vt.{kind}({g})"
    if kind == "jvp":
        return f"lambda x: vt.jvp({g}, (x,), (TAN{k},))[1]"
    if kind == "hvp":
        return f"lambda x: vt.jvp(vt.grad({g}), (x,), (TAN{k},))[1]"
    if kind == "vjp":
        return f"lambda x: vt.vjp({g}, x)[1](COT{k})[0]"
    if kind == "sumw":
        return f"lambda x: vt.sum({g}(x) * W{k})"
    raise ValueError(kind)


def describe_stack(layers: list) -> str:
    if not layers:
        return "eager"
    parts = []
    for l in reversed(layers):
        if l["kind"] == "vmap":
            extra = [f"B={l['B']}"] + ([f"in_axes={l['in']}"] if l["in"] else []) + \
                ([f"out_axes={l['out']}"] if l["out"] else [])
            parts.append(f"vmap({', '.join(extra)})")
        else:
            parts.append(l["kind"])
    return "∘".join(parts)


def fd_code(layer: dict, k: int, lv: int) -> str:
    """Code checking derivative layer k (level lv of S_loop's levels) against central differences of the level inside
    it, on the unrolled program: raises AssertionError on a mismatch."""
    kind = layer["kind"]
    head = f"G = S_loop(F_plain)[{lv - 1}]\nx, d = XF{k}, DF{k}\n"
    h1, h2 = "(1e-5, 1e-4, 1e-6)", "(1e-3, 1e-4, 3e-5, 1e-5)"
    if kind == "grad":
        return head + f"fd_check('grad', np.vdot(_np(vt.grad(G)(x)), d), lambda h, s=0: fd1(G, x, d, h, s), {h1}, 1e-6)"
    if kind == "value_and_grad":
        return head + ("v, g = vt.value_and_grad(G)(x)\n"
                       f"fd_check('value_and_grad', (v, np.vdot(_np(g), d)), lambda h, s=0: (G(x), fd1(G, x, d, h, s)), {h1}, 1e-6)")
    if kind in ("jacfwd", "jacrev"):
        return head + f"fd_check('{kind}', tdot(vt.{kind}(G)(x), d), lambda h, s=0: fd1(G, x, d, h, s), {h1}, 1e-6)"
    if kind == "jvp":
        return head + f"fd_check('jvp', vt.jvp(G, (x,), (TAN{k},))[1], lambda h, s=0: fd1(G, x, TAN{k}, h, s), {h1}, 1e-6)"
    if kind == "vjp":
        return head + (f"fd_check('vjp', np.vdot(_np(vt.vjp(G, x)[1](COT{k})[0]), d), "
                       f"lambda h, s=0: np.vdot(_np(COT{k}), fd1(G, x, d, h, s)), {h1}, 1e-6)")
    if kind == "hessian":
        return head + (f"fd_check('hessian', np.vdot(tdot(vt.hessian(G)(x), EF{k}), d), "
                       f"lambda h: fd2(G, x, d, EF{k}, h), {h2}, 1e-4)")
    if kind == "hvp":
        return head + (f"fd_check('hvp', np.vdot(_np(vt.jvp(vt.grad(G), (x,), (TAN{k},))[1]), d), "
                       f"lambda h: fd2(G, x, d, TAN{k}, h), {h2}, 1e-4)")
    raise ValueError(kind)


# ================================================================================================ the harness

HARNESS = r'''
def _flat(x):
    if isinstance(x, (tuple, list)):
        return [y for e in x for y in _flat(e)]
    if isinstance(x, dict):
        return [y for k in sorted(x) for y in _flat(x[k])]
    return [x]


def _np(x):
    return np.asarray(x, dtype=np.float64)


def compare(a, b, rtol, what="compare"):
    """None where a equals b (the same structure and shapes, NaN where b has NaN, max |a - b| <= rtol (1 + max |b|)
    over each leaf's finite values), else what differs."""
    la, lb = _flat(a), _flat(b)
    if len(la) != len(lb):
        return f"{what}: {len(la)} results, expected {len(lb)}"
    for i, (x, y) in enumerate(zip(la, lb)):
        x, y = _np(x), _np(y)
        where = f"{what}: result {i}" if len(la) > 1 else what
        if x.shape != y.shape:
            return f"{where}: shape {x.shape}, expected {y.shape}"
        if (np.isnan(x) != np.isnan(y)).any():
            return f"{where}: NaN pattern differs: {np.array2string(x, precision=6)}, expected {np.array2string(y, precision=6)}"
        fx, fy = np.isfinite(x), np.isfinite(y)
        if (fx != fy).any() or (x[~fx & ~np.isnan(x)] != y[~fy & ~np.isnan(y)]).any():
            return f"{where}: infinities differ: {np.array2string(x, precision=6)}, expected {np.array2string(y, precision=6)}"
        if fx.any():
            err = float(np.max(np.abs(x[fx] - y[fx])))
            scale = float(np.max(np.abs(y[fx])))
            if not err <= rtol * (1.0 + scale):
                return (f"{where}: max |difference| {err:.3g} (scale {scale:.3g}, tolerance {rtol:g}): "
                        f"{np.array2string(x, precision=10)}, expected {np.array2string(y, precision=10)}")
    return None


def check(a, b, rtol, what):
    msg = compare(a, b, rtol, what)
    if msg is not None:
        raise AssertionError(msg)


def fd1(G, x, d, h, side=0):
    """Central differences of G at x along d, or one-sided (side 1 or -1)."""
    if side:
        return side * (_np(G(x + side * h * d)) - _np(G(x))) / h
    return (_np(G(x + h * d)) - _np(G(x - h * d))) / (2 * h)


def fd2(G, x, d, e, h):
    return (_np(G(x + h * d + h * e)) - _np(G(x + h * d - h * e)) - _np(G(x - h * d + h * e)) + _np(G(x - h * d - h * e))) / (4 * h * h)


def tdot(a, d):
    d = np.asarray(d)
    return np.tensordot(_np(a), d, axes=d.ndim)


class FdUnresolved(Exception):
    """Central differences that settle at none of the steps: they cannot judge the derivative."""


def fd_check(what, a, fd, hs, rtol):
    """a equals central differences fd(h) for one of the steps hs (a kink near x fails one step, not all), or, for
    first derivatives (fd(h, side)), a one-sided difference (a kink closer to x than the steps). Where none does,
    the differences judge only if they have settled: two steps agree with each other and neither is NaN where a is
    a number (a function that is NaN beside x, or whose differences still move with the step, proves nothing)."""
    first, estimates = None, []
    for h in hs:
        e = fd(h)
        msg = compare(a, e, rtol, f"{what} against central differences (h={h:g})")
        if msg is None:
            return
        first = first or msg
        if not any((np.isnan(_np(y)) & ~np.isnan(_np(x))).any() for x, y in zip(_flat(a), _flat(e))):
            estimates.append(e)
    if fd.__code__.co_argcount == 2:
        for side in (1, -1):
            if compare(a, fd(1e-7, side), 1e-5) is None:
                return
    if not any(compare(e, f, rtol) is None for i, e in enumerate(estimates) for f in estimates[i + 1:]):
        raise FdUnresolved(first)
    raise AssertionError(first)


def loopmap(g, in_axis, out_axis, size):
    """vmap(g, in_axis, out_axis) as a Python loop over the examples."""
    def run(x):
        x = vt.asarray(x)
        a = in_axis if in_axis >= 0 else x.ndim + in_axis
        outs = [g(x[(slice(None),) * a + (b,)]) for b in range(size)]

        def stack(*ys):
            o = out_axis if out_axis >= 0 else ys[0].ndim + 1 + out_axis
            return vt.stack(list(ys), o)

        return vt.tree_map(stack, *outs)
    return run
'''

JAX_SHIM = r'''
def jax_namespace():
    """vtape's names for the JAX functions the generated programs use."""
    import types
    import jax
    import jax.numpy as jnp
    import jax.scipy.special
    jax.config.update("jax_enable_x64", True)
    names = dict(
        asarray=jnp.asarray, sum=jnp.sum, mean=jnp.mean, sin=jnp.sin, cos=jnp.cos, tanh=jnp.tanh, exp=jnp.exp,
        log=jnp.log, log1p=jnp.log1p, sqrt=jnp.sqrt, square=jnp.square, abs=jnp.abs, sigmoid=jax.nn.sigmoid,
        softplus=jax.nn.softplus, erf=jax.scipy.special.erf, maximum=jnp.maximum, clip=jnp.clip, where=jnp.where,
        reshape=jnp.reshape, concatenate=jnp.concatenate, cumsum=jnp.cumsum,
        logsumexp=jax.scipy.special.logsumexp, stack=jnp.stack, full=jnp.full, zeros=jnp.zeros,
        ones=jnp.ones, astype=lambda x, d: jnp.asarray(x).astype(d), float64=jnp.float64,
        scan=lambda f, init, xs=None, length=None, reverse=False, checkpoint_every=0: jax.lax.scan(
            f, init, xs, length=length, reverse=reverse), fori_loop=jax.lax.fori_loop, while_loop=jax.lax.while_loop, cond=jax.lax.cond,
        grad=jax.grad, value_and_grad=jax.value_and_grad, jvp=jax.jvp, vjp=jax.vjp, jacfwd=jax.jacfwd,
        jacrev=jax.jacrev, hessian=jax.hessian, vmap=jax.vmap, jit=jax.jit, tree_map=jax.tree_util.tree_map)
    return types.SimpleNamespace(**names)
'''


CHECK_MARK = "# ---------------------------------------------------------------- the check"


def repro_source(prog: Program, failure: dict, use_jax: bool) -> str:
    """A runnable script: the program, then the check that failed (it raises, crashes or prints the mismatch)."""
    st, cmp = prog.checks(use_jax)
    kind, stage = failure["kind"], failure.get("stage")
    head = [f"# vtape composition fuzzer: seed {prog.seed}, {kind}" + (f" at stage {stage}" if stage else ""),
            "# " + failure.get("message", "").splitlines()[0][:300] if failure.get("message") else "#",
            f"# stack: {describe_stack(prog.layers)}; features: {', '.join(sorted(prog.features))}"]
    if failure.get("oracle") == "jax":
        lines = head + ["import numpy as np", "import vtape", "", "SOURCE = r'''", prog.module().rstrip(), "'''",
                        HARNESS.replace("vt.", "vtape."), JAX_SHIM,
                        "vt = vtape",
                        "ns = {'vt': vtape, 'np': np}", "exec(SOURCE, ns)",
                        "R_full = ns['S_full'](ns['F'])(ns['X'])",
                        "jns = {'vt': jax_namespace(), 'np': np}", "exec(SOURCE, jns)",
                        "import jax", "R_jax = jax.jit(jns['S_full'](jns['F']))(jns['X'])",
                        "print('vtape:', R_full)", "print('jax:  ', R_jax)",
                        "check(R_full, R_jax, 1e-7, 'vtape against jax')"]
        return "\n".join(lines) + "\n"
    lines = head + ["import numpy as np", "import vtape as vt", HARNESS, prog.module(), CHECK_MARK]
    need = []

    def want(s):
        if s == "prog_jit2":
            want("prog_jit")
        if s == "full2":
            want("full")
        if s not in need:
            need.append(s)

    if kind.startswith("mismatch") and "pair" in failure:
        a, b = failure["pair"]
        want(a)
        want(b)
    elif stage:
        want(stage)
    for s in need:
        lines.append(st[s])
    if kind.startswith("mismatch") and "pair" in failure:
        a, b = failure["pair"]
        rtol = next(c[2] for c in cmp if c[0] == a and c[1] == b)
        lines.append(f"print('got:     ', R_{a})")
        lines.append(f"print('expected:', R_{b})")
        lines.append(f"check(R_{a}, R_{b}, {rtol!r}, {failure['oracle']!r})")
    elif kind == "batched":
        lines.append(f"assert not any(getattr(t, 'is_batched', False) for t in _flat(R_{stage})), 'a batched result'")
    return "\n".join(lines) + "\n"


# ================================================================================================ the worker


def run_program(job: dict, vt, jax_ns, progress) -> dict:
    """Runs one program's stages and comparisons; returns its outcome, failures, checks and features."""
    import numpy as np

    prog = Program(job["seed"], job.get("stub", ()), job.get("drop_layers", ()), job.get("drop_terms", ()))
    use_jax = jax_ns is not None and job.get("jax", False)
    st, cmp = prog.checks(use_jax)
    only = job.get("only")
    src = prog.module()
    ns = {"vt": vt, "np": np}
    exec(compile(HARNESS, "<harness>", "exec"), ns)
    exec(compile(src, f"<seed {prog.seed}>", "exec"), ns)
    results, errors, failures, checks, expected = {}, {}, [], [], []
    clean = (vt.Error, TypeError)

    def fail(kind, stage, message, **extra):
        failures.append(dict(kind=kind, stage=stage, message=message, **extra))

    for name, code in st.items():
        if only is not None and name not in only:
            continue
        if name in ("prog_jit2", "full2") and (name[:-1] in errors or name[:-1] not in results):
            continue
        progress(name)
        try:
            exec(compile(code, f"<seed {prog.seed}: {name}>", "exec"), ns)
            if not name.startswith("fd"):
                results[name] = ns[f"R_{name}"]
            else:
                checks.append("fd")
        except AssertionError as e:
            fail("mismatch:fd", name, str(e), oracle="fd")
        except ns["FdUnresolved"]:
            checks.append("fd-unresolved")
        except Exception as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {e}"
            errors[name] = msg
            if isinstance(e, clean) and prog.while_under_reverse and re.search(r"while_loop.*reverse", str(e), re.I):
                expected.append(f"{name}: {msg}")
                continue
            if name.startswith("fd") and isinstance(e, clean) and prog.while_under_reverse:
                continue
            tb = traceback.format_exc().strip().splitlines()
            fail("raise", name, msg, where=" | ".join(tb[-6:-1])[-600:])
    for name, r in results.items():
        if name.startswith("prog") or name in ("full", "full2", "nojit"):
            if any(getattr(t, "is_batched", False) for t in ns["_flat"](r)):
                fail("batched", name, f"{name}: a batched tensor where plain arrays were expected")
    if use_jax and (only is None or "jax" in only):
        progress("jax")
        try:
            import jax

            jns = {"vt": jax_ns, "np": np}
            exec(compile(HARNESS.replace("vt.asarray(x)", "x"), "<harness>", "exec"), jns)
            exec(compile(src, f"<seed {prog.seed} (jax)>", "exec"), jns)
            results["jax"] = jax.block_until_ready(jax.jit(jns["S_full"](jns["F"]))(jns["X"]))
        except Exception as e:  # noqa: BLE001
            errors["jax"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    for a, b, rtol, oracle in cmp:
        if a not in results or b not in results:
            continue
        checks.append(oracle)
        try:
            msg = ns["compare"](results[a], results[b], rtol, f"{oracle}: {a} against {b}")
        except Exception as e:  # noqa: BLE001  (a result that cannot be read: a leaked tracer, ...)
            bad = a
            for s in (a, b):
                try:
                    ns["compare"](results[s], results[s], 0.0)
                except Exception:  # noqa: BLE001
                    bad = s
                    break
            if not any(f["stage"] == bad and f["kind"] == "raise" for f in failures):
                fail("raise", bad, f"reading the result: {type(e).__name__}: {e}")
            continue
        if msg is not None:
            extra = {}
            if oracle == "jax":
                # triage: does vtape's own unrolled reference agree with JAX?
                ref = ns["compare"](results.get("plain"), results["jax"], rtol, "") if "plain" in results else "?"
                extra["vtape_reference_agrees_with_jax"] = ref is None
            fail(f"mismatch:{oracle}", a, msg, pair=[a, b], oracle=oracle, **extra)
    outcome = "failed" if failures else ("expected-error" if expected else "ok")
    return dict(seed=prog.seed, outcome=outcome, failures=failures, checks=checks, features=sorted(prog.features),
                stack=describe_stack(prog.layers), expected=expected,
                jax=("skipped" if not use_jax else ("raised: " + errors["jax"]) if "jax" in errors else "ok"))


def worker_main():
    """--worker: reads jobs (JSON lines) from stdin, writes progress and results to the protocol pipe (stdout);
    the programs' own output goes to stderr."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import vtape as vt

    jax_ns = None

    def progress(stage):
        proto.write(json.dumps({"stage": stage}) + "\n")
        proto.flush()

    for line in sys.stdin:
        job = json.loads(line)
        if job.get("selftest") == "crash":
            import signal

            os.kill(os.getpid(), signal.SIGSEGV)
        if job.get("jax") and jax_ns is None:
            ns: dict = {}
            exec(JAX_SHIM, ns)
            jax_ns = ns["jax_namespace"]()
        try:
            res = run_program(job, vt, jax_ns if job.get("jax") else None, progress)
        except Exception as e:  # noqa: BLE001  (a failure of the harness or the generator itself)
            res = dict(seed=job.get("seed"), outcome="failed", checks=[], features=[], stack="?", expected=[],
                       jax="skipped",
                       failures=[dict(kind="harness", stage=None, message=f"{type(e).__name__}: {e}",
                                      where=traceback.format_exc()[-800:])])
        proto.write(json.dumps({"done": res}) + "\n")
        proto.flush()


# ================================================================================================ the pool


class Worker:
    def __init__(self, env, stderr_path):
        self.err = open(stderr_path, "w+b")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, env=env)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buf = b""
        self.job = None
        self.stage = None
        self.started = 0.0
        self.done = 0

    def send(self, job):
        self.job, self.stage, self.started = job, None, time.monotonic()
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()

    def stderr_tail(self) -> str:
        try:
            self.err.flush()
            self.err.seek(0, os.SEEK_END)
            n = self.err.tell()
            self.err.seek(max(0, n - 1500))
            return self.err.read().decode(errors="replace")
        except OSError:
            return ""

    def kill(self):
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()
        self.err.close()


def worker_env(threads: int) -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(threads))
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_jobs(jobs: list, n_workers: int, timeout: float, threads: int = 1, on_result=None, recycle: int = 400):
    """Runs the jobs in n_workers worker processes; a worker that dies (a signal) or runs past `timeout` is reported
    as a crash or a timeout of its job, with the stage it was in, and replaced. Returns the results in job order."""
    import tempfile

    env = worker_env(threads)
    tmp = tempfile.mkdtemp(prefix="fuzz_compose_")
    sel = selectors.DefaultSelector()
    workers: list = []
    results: list = [None] * len(jobs)
    pending = list(enumerate(jobs))[::-1]
    counter = [0]

    def spawn():
        counter[0] += 1
        w = Worker(env, os.path.join(tmp, f"worker{counter[0]}.err"))
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        workers.append(w)
        return w

    def retire(w):
        sel.unregister(w.proc.stdout)
        workers.remove(w)
        w.kill()

    def feed(w):
        if pending:
            idx, job = pending.pop()
            w.index = idx
            w.send(job)
        else:
            w.job = None

    def finish(w, res):
        results[w.index] = res
        if on_result:
            on_result(res)
        w.job = None
        w.done += 1

    def lost(w, kind, message):
        job = w.job
        tail = w.stderr_tail().strip().splitlines()[-3:]
        res = dict(seed=job.get("seed"), outcome="failed", checks=[], features=[], stack="?", expected=[], jax="?",
                   failures=[dict(kind=kind, stage=w.stage, message=message + (" | " + " | ".join(tail) if tail else ""))])
        finish(w, res)

    for _ in range(max(1, min(n_workers, len(jobs)))):
        feed(spawn())
    try:
        while any(w.job is not None for w in workers):
            events = sel.select(timeout=0.5)
            for key, _ in events:
                w = key.data
                try:
                    chunk = os.read(w.proc.stdout.fileno(), 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:  # the worker died
                    code = w.proc.wait()
                    if w.job is not None:
                        if code < 0:
                            import signal as _s

                            name = _s.Signals(-code).name if -code in _s.Signals._value2member_map_ else str(-code)
                            lost(w, "crash", f"killed by {name}")
                        else:
                            lost(w, "crash", f"the worker exited with status {code}")
                    retire(w)
                    if pending:
                        feed(spawn())
                    continue
                w.buf += chunk
                while b"\n" in w.buf:
                    line, w.buf = w.buf.split(b"\n", 1)
                    msg = json.loads(line)
                    if "stage" in msg:
                        w.stage = msg["stage"]
                    elif "done" in msg:
                        finish(w, msg["done"])
                        if w.done >= recycle and pending:
                            retire(w)
                            feed(spawn())
                        else:
                            feed(w)
            now = time.monotonic()
            for w in list(workers):
                if w.job is not None and now - w.started > timeout:
                    lost(w, "timeout", f"no result after {timeout:g} s")
                    retire(w)
                    if pending:
                        feed(spawn())
    finally:
        for w in list(workers):
            retire(w)
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    return results


# ================================================================================================ the reducer


def same_failure(res: dict, target: dict):
    """The failure in `res` that is `target`'s kind (a crash anywhere is a crash; an exception of the same type and
    op; a mismatch of the same oracle at the same stage), or None."""
    for f in res.get("failures", []):
        if f["kind"] != target["kind"]:
            continue
        if f["kind"] in ("crash", "timeout"):
            return f
        if f.get("stage") != target.get("stage") and not ((f.get("stage") or "").startswith("fd") and
                                                          (target.get("stage") or "").startswith("fd")):
            continue
        if f["kind"] == "raise":
            head = lambda m: re.sub(r"\[.*", "", m)[:60]  # noqa: E731  (the type and the op, not the shapes)
            if head(f["message"]) == head(target["message"]):
                return f
            continue
        return f
    return None


def reduce_failure(seed: int, target: dict, use_jax: bool, timeout: float, budget: int = 120) -> dict:
    """Removes what the failure does not need: stack layers, terms of the result, statements (replaced by constants
    of their shapes), as long as the same kind of failure at the same stage remains. Returns the reduction."""
    prog = Program(seed)
    state = dict(stub=set(), drop_layers=set(), drop_terms=set())
    tries = [0]
    last = [target]

    def test(cand) -> bool:
        if tries[0] >= budget:
            return False
        try:
            Program(seed, cand["stub"], cand["drop_layers"], cand["drop_terms"])
        except ValueError:
            return False
        tries[0] += 1
        job = dict(seed=seed, jax=use_jax, stub=sorted(cand["stub"]), drop_layers=sorted(cand["drop_layers"]),
                   drop_terms=sorted(cand["drop_terms"]))
        res = run_jobs([job], 1, timeout)[0]
        found = same_failure(res, target)
        if found is not None:
            last[0] = found
        return found is not None

    def attempt(key, item):
        cand = {k: set(v) for k, v in state.items()}
        cand[key].add(item)
        if test(cand):
            state[key].add(item)
            return True
        return False

    changed = True
    while changed and tries[0] < budget:
        changed = False
        for k in range(len(prog.layers)):
            if k not in state["drop_layers"] and attempt("drop_layers", k):
                changed = True
        for k in range(len(prog.terms)):
            if k not in state["drop_terms"] and len(prog.terms) - len(state["drop_terms"]) > 1 and \
                    attempt("drop_terms", k):
                changed = True
        for s in prog.walk():
            if s.sid in state["stub"]:
                continue
            if attempt("stub", s.sid):  # its results become constants (a statement without results goes)
                changed = True
    return {k: sorted(v) for k, v in state.items()} | {"tries": tries[0], "failure": last[0]}


# ================================================================================================ the command line


def signature(f: dict) -> str:
    """A failure's kind and the gist of its message (numbers and shapes left out): one reduction per signature."""
    msg = re.sub(r"\[.*|[-+]?\d[\d.e+-]*|\(.*", "", f["message"].splitlines()[0] if f["message"] else "")[:80]
    return f"{f['kind']}|{f.get('stage') if f['kind'] != 'raise' else ''}|{msg}"


def summarize(results: list, elapsed: float, args, repros: dict) -> str:
    from collections import Counter

    outcomes = Counter(r["outcome"] for r in results)
    checks = Counter(c for r in results for c in set(r["checks"]))
    feats = Counter(f for r in results for f in r["features"])
    stacks = Counter(r["stack"] for r in results)
    jaxc = Counter(("raised" if r["jax"].startswith("raised") else r["jax"]) for r in results)
    lines = [f"vtape composition fuzzer: {len(results)} programs (seeds {args.seed}..{args.seed + args.count - 1}), "
             f"jax {'on' if args.jax else 'off'}, {args.jobs} jobs, {elapsed:.1f} s"]
    lines.append("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    exp = Counter(e.split(":", 1)[1].strip()[:90] for r in results for e in r.get("expected", [])[:1])
    for k, v in exp.most_common(5):
        lines.append(f"  expected error ({v}): {k}")
    lines.append("programs per oracle: " + ", ".join(f"{k} {v}" for k, v in sorted(checks.items())))
    lines.append("features: " + ", ".join(f"{k} {v}" for k, v in sorted(feats.items())))
    lines.append(f"stacks: {len(stacks)} distinct; most common: " +
                 ", ".join(f"{k} {v}" for k, v in stacks.most_common(8)))
    if args.jax:
        lines.append("jax: " + ", ".join(f"{k} {v}" for k, v in sorted(jaxc.items())))
        jr = Counter(r["jax"][8:90] for r in results if r["jax"].startswith("raised"))
        for k, v in jr.most_common(4):
            lines.append(f"  jax raised ({v}): {k}")
    fails = [(r, f) for r in results for f in r["failures"]]
    kinds = Counter(f["kind"] + (f":{f['stage']}" if f["kind"] in ("raise", "crash", "timeout") else "")
                    for _, f in fails)
    lines.append(f"failures: {len(fails)} in {outcomes.get('failed', 0)} programs")
    for k, v in kinds.most_common():
        seeds = sorted({r["seed"] for r, f in fails if f["kind"] + (f":{f['stage']}" if f["kind"] in
                                                                       ("raise", "crash", "timeout") else "") == k})
        lines.append(f"  {k}: {v} (seeds {', '.join(map(str, seeds[:12]))}{' ...' if len(seeds) > 12 else ''})")
    for r, f in fails[: args.max_show]:
        lines.append(f"seed {r['seed']} [{r['stack']}] {f['kind']} at {f.get('stage')}: {f['message'][:400]}")
        if f.get("where"):
            lines.append(f"    where: {f['where'][-300:]}")
        if f.get("vtape_reference_agrees_with_jax") is not None:
            lines.append(f"    vtape's unrolled reference agrees with jax: {f['vtape_reference_agrees_with_jax']}")
        if (r["seed"], f["kind"], f.get("stage")) in repros:
            lines.append(f"    repro: {repros[(r['seed'], f['kind'], f.get('stage'))]}")
    return "\n".join(lines)


# ================================================================================================ source minimization


def _outcome_line(line: str) -> str:
    """An exception's line without its numbers where they are values (a mismatch), with them where they are shapes
    (an error: a smaller program that raises for other shapes is not the same failure)."""
    if line.startswith("AssertionError"):
        return re.sub(r"\(.*?\)|\[.*|[-+]?\d[\d.e+-]*", "#", line)[:90]
    return line[:160]


def script_outcome(src: str, timeout: float) -> str:
    """How a repro script ends: "ok", "signal N" (SIGALRM: past `timeout`) or its exception's type and message,
    numbers and shapes left out (so that a smaller program failing the same way has the same outcome). The script
    runs in a fork of this process (which has imported vtape but run nothing), so a crash is an outcome too."""
    import signal as _signal

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        _signal.alarm(max(1, int(timeout)))
        try:
            sys.stdout = sys.stderr = open(os.devnull, "w")
            exec(compile(src, "<candidate>", "exec"), {"__name__": "__main__"})
            msg = "ok"
        except BaseException as e:  # noqa: BLE001
            msg = _outcome_line(f"{type(e).__name__}: {e}".splitlines()[0])
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 4096)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return b"".join(chunks).decode() or f"exit {os.WEXITSTATUS(status)}"


def minimize_source(src: str, timeout: float = 60.0, log=None) -> str:
    """Delta debugging over the syntax tree of the program in a repro script (F, or F_plain where the check reads
    only that; the stacks and the check are kept, definitions the check does not need go): deletes statements and
    replaces expressions by one of their operands while the script fails the same way (script_outcome) and the
    program still runs eagerly. Returns the smallest script found."""
    import ast

    os.environ.update({k: v for k, v in worker_env(1).items() if k not in os.environ})
    import vtape  # noqa: F401  (imported once, before the forks)

    if CHECK_MARK not in src:
        raise ValueError("not a repro of tools/fuzz_compose.py (its check is not marked)")
    check = src.split(CHECK_MARK)[1]
    reads = [f for f in ("F", "F_plain") if re.search(rf"\b{f}\b", check)]
    if len(reads) != 1:
        # the check compares F with F_plain: shrinking one of them alone would make them differ
        raise ValueError("the check compares the program with its unrolled form: reduce it with the generator's "
                         "reducer (the default of a campaign), not by its source")
    target = reads[0]
    if not re.search(rf"R_prog(_plain)? = {target}\(P0\)", check):
        # the program must stay valid: it runs eagerly on one example (else deleting a vmap that made the shapes
        # fit would "reproduce" a shape error)
        src = src.replace(CHECK_MARK, CHECK_MARK + f"\ntry:\n    {target}(P0)\nexcept Exception:\n"
                                                  "    raise SystemExit('the program no longer runs eagerly')", 1)
    want = script_outcome(src, timeout)
    if want == "ok":
        raise ValueError("the script does not fail")
    tree = ast.parse(src)
    runs = [0]

    def holds() -> bool:
        try:
            cand = ast.unparse(tree)
        except Exception:  # noqa: BLE001
            return False
        runs[0] += 1
        return script_outcome(cand, timeout) == want

    program = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == target]

    def bodies():
        """Every statement list inside the program's functions, innermost first, then the module's."""
        out = []
        for fn in program:
            for node in ast.walk(fn):
                for field in ("body", "orelse"):
                    b = getattr(node, field, None)
                    if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
                        out.append((node, field))
        return out[::-1]

    def operands(node):
        if isinstance(node, ast.BinOp):
            return [node.left, node.right]
        if isinstance(node, ast.UnaryOp):
            return [node.operand]
        if isinstance(node, ast.Call):
            return [a for a in node.args if not isinstance(a, ast.Starred)]
        if isinstance(node, ast.Subscript):
            return [node.value]
        return []

    def note(what):
        if log:
            log(f"{what} ({runs[0]} runs)")

    # constants and inputs the check does not read go first (module-level assignments of K.., unused defs)
    k = 0
    while k < len(tree.body):
        node = tree.body[k]
        removable = (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and
                     re.fullmatch(r"K\d+", node.targets[0].id)) or \
                    (isinstance(node, ast.FunctionDef) and node.name in ("F", "F_plain", "S_full", "S_nojit", "S_loop")
                     and node.name != target)
        if removable:
            del tree.body[k]
            if holds():
                note("deleted a definition")
                program[:] = [n for n in program if n is not node]
                continue
            tree.body.insert(k, node)
        k += 1
    changed = True
    while changed:
        changed = False
        for owner, field in bodies():
            k = 0
            while k < len(getattr(owner, field)):
                body = getattr(owner, field)
                if len(body) == 1:
                    break
                if isinstance(body[k], ast.Return):  # a function keeps its result
                    k += 1
                    continue
                setattr(owner, field, body[:k] + body[k + 1 :])
                if holds():
                    changed = True
                    note("deleted a statement")
                else:
                    setattr(owner, field, body)
                    k += 1
        for fn in program:
            for parent in list(ast.walk(fn)):
                for name, value in ast.iter_fields(parent):
                    items = value if isinstance(value, list) else [value]
                    for i, node in enumerate(items):
                        if not isinstance(node, ast.expr):
                            continue
                        for sub in operands(node):
                            if isinstance(value, list):
                                value[i] = sub
                            else:
                                setattr(parent, name, sub)
                            if holds():
                                changed = True
                                note("replaced an expression by an operand")
                                break
                            if isinstance(value, list):
                                value[i] = node
                            else:
                                setattr(parent, name, node)
    return ast.unparse(tree) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jax", dest="jax", action="store_true", default=None, help="JAX as a further oracle (default: "
                    "on where jax is installed)")
    ap.add_argument("--no-jax", dest="jax", action="store_false")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per program")
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the workers")
    ap.add_argument("--repro-dir", default="fuzz-compose-repros")
    ap.add_argument("--no-reduce", dest="reduce", action="store_false", default=True)
    ap.add_argument("--reduce-budget", type=int, default=100, help="runs per reduced failure")
    ap.add_argument("--max-reduce", type=int, default=40, help="failures reduced (one per kind of failure)")
    ap.add_argument("--max-show", type=int, default=40)
    ap.add_argument("--json", help="write every program's outcome to this file")
    ap.add_argument("--show", type=int, metavar="SEED", help="print program SEED's source and exit")
    ap.add_argument("--minimize", metavar="FILE", help="shrink the repro script FILE while it fails the same way; "
                    "writes FILE's name with _min before .py")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker_main()
        return 0
    if args.minimize:
        src = open(args.minimize).read()
        out = minimize_source(src, args.timeout, log=lambda m: print(m, file=sys.stderr))
        path = args.minimize[:-3] + "_min.py"
        with open(path, "w") as fh:
            fh.write(out)
        print(f"{path}: {len(src.splitlines())} -> {len(out.splitlines())} lines, failing as: "
              f"{script_outcome(out, args.timeout)}")
        return 0
    if args.show is not None:
        p = Program(args.show)
        print(p.module())
        st, _ = p.checks(False)
        print("\n".join(st.values()))
        return 0
    if args.jax is None:
        import importlib.util

        args.jax = importlib.util.find_spec("jax") is not None
    t0 = time.monotonic()
    done = [0]

    def tick(res):
        done[0] += 1
        if sys.stderr.isatty() and done[0] % 50 == 0:
            print(f"\r{done[0]}/{args.count}", end="", file=sys.stderr, flush=True)

    jobs = [dict(seed=s, jax=args.jax) for s in range(args.seed, args.seed + args.count)]
    results = run_jobs(jobs, args.jobs, args.timeout, args.threads, tick)
    elapsed = time.monotonic() - t0
    repros = {}
    reduced: set = set()
    failed = [r for r in results if r["failures"]]
    if failed:
        os.makedirs(args.repro_dir, exist_ok=True)
    for r in failed:
        for f in r["failures"]:
            key = (r["seed"], f["kind"], f.get("stage"))
            if key in repros or f["kind"] == "harness":
                continue
            red = None
            sig = signature(f)
            if args.reduce and sig not in reduced and len(reduced) < args.max_reduce:
                reduced.add(sig)
                red = reduce_failure(r["seed"], f, args.jax and f["kind"] == "mismatch:jax", args.timeout,
                                     args.reduce_budget)
            prog = Program(r["seed"], *(() if red is None else (red["stub"], red["drop_layers"], red["drop_terms"])))
            safe = re.sub(r"[^A-Za-z0-9]+", "_", f"{f['kind']}_{f.get('stage')}")
            path = os.path.join(args.repro_dir, f"seed{r['seed']}_{safe}.py")
            with open(path, "w") as fh:
                fh.write(repro_source(prog, f if red is None else red["failure"], args.jax))
            if red is not None:
                with open(path[:-3] + "_unreduced.py", "w") as fh:
                    fh.write(repro_source(Program(r["seed"]), f, args.jax))
            repros[key] = path
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    print(summarize(results, elapsed, args, repros))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
