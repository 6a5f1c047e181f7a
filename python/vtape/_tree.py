"""Pytrees: nested tuples, namedtuples, lists and dicts (and None) of leaves, and the node types registered with
register_pytree_node, flattened to a list and rebuilt, as JAX does.

A dict's entries are taken in the order of its sorted keys, so that equal dicts flatten alike.
"""

from __future__ import annotations

from typing import Any, Callable


class TreeDef:
    """The structure of a pytree with its leaves left out: what tree_unflatten rebuilds."""

    __slots__ = ("kind", "children", "keys")

    def __init__(self, kind: str, children: tuple = (), keys: tuple = ()):
        self.kind = kind  # "leaf", "none", "tuple", "list", "dict", "namedtuple" (keys: its class) or "custom"
        # (keys: the node type and its aux data)
        self.children = children
        self.keys = keys

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TreeDef)
            and self.kind == other.kind
            and self.keys == other.keys
            and self.children == other.children
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.keys, self.children))

    def __repr__(self) -> str:
        if self.kind in ("leaf", "none"):
            return "*" if self.kind == "leaf" else "None"
        if self.kind in ("namedtuple", "custom"):
            return f"{self.keys[0].__name__}({', '.join(repr(c) for c in self.children)})"
        inner = ", ".join(
            f"{k!r}: {c!r}" for k, c in zip(self.keys, self.children)
        ) if self.kind == "dict" else ", ".join(repr(c) for c in self.children)
        return {"tuple": f"({inner})", "list": f"[{inner}]", "dict": f"{{{inner}}}"}[self.kind]


LEAF = TreeDef("leaf")

# Node types registered by register_pytree_node: type -> (flatten, unflatten).
_registry: dict[type, tuple[Callable, Callable]] = {}


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable) -> None:
    """Makes nodetype a pytree node, as jax.tree_util's: flatten_func(node) gives (children, aux_data), with aux_data
    hashable and compared for structure equality; unflatten_func(aux_data, children) rebuilds the node."""
    _registry[nodetype] = (flatten_func, unflatten_func)


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, TreeDef]:
    """The leaves of `tree` in order, and its structure."""
    leaves: list = []

    def walk(node: Any) -> TreeDef:
        if is_leaf is not None and is_leaf(node):
            leaves.append(node)
            return LEAF
        if node is None:
            return TreeDef("none")
        if type(node) in _registry:
            children, aux = _registry[type(node)][0](node)
            return TreeDef("custom", tuple(walk(c) for c in children), (type(node), aux))
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            return TreeDef("namedtuple", tuple(walk(c) for c in node), (type(node),))
        if isinstance(node, tuple):
            return TreeDef("tuple", tuple(walk(c) for c in node))
        if isinstance(node, list):
            return TreeDef("list", tuple(walk(c) for c in node))
        if isinstance(node, dict):
            keys = tuple(sorted(node))
            return TreeDef("dict", tuple(walk(node[k]) for k in keys), keys)
        leaves.append(node)
        return LEAF

    return leaves, walk(tree)


def tree_unflatten(treedef: TreeDef, leaves: list) -> Any:
    """The pytree of structure `treedef` holding `leaves`, in order."""
    it = iter(leaves)

    def build(t: TreeDef) -> Any:
        if t.kind == "leaf":
            return next(it)
        if t.kind == "none":
            return None
        children = [build(c) for c in t.children]
        if t.kind == "namedtuple":
            return t.keys[0](*children)
        if t.kind == "custom":
            return _registry[t.keys[0]][1](t.keys[1], children)
        if t.kind == "tuple":
            return tuple(children)
        if t.kind == "list":
            return children
        return dict(zip(t.keys, children))

    out = build(treedef)
    if next(it, None) is not None:
        raise ValueError("tree_unflatten: more leaves than the structure holds")
    return out


def tree_map(f: Callable, tree: Any, *rest: Any) -> Any:
    """f applied to every leaf of `tree` (and the matching leaves of `rest`, of the same structure)."""
    leaves, treedef = tree_flatten(tree)
    others = []
    for r in rest:
        r_leaves, r_def = tree_flatten(r)
        if r_def != treedef:
            raise ValueError(f"tree_map: structures differ: {treedef!r} and {r_def!r}")
        others.append(r_leaves)
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])
