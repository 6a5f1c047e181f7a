"""jax.tree_util's functions over vtape's pytrees (tuples, namedtuples, lists, dicts, None and registered node types):
`from vtape import tree_util`."""

from ._tree import TreeDef, register_pytree_node, tree_flatten, tree_map, tree_unflatten  # noqa: F401


def tree_leaves(tree) -> list:
    """The leaves of tree, in order."""
    return tree_flatten(tree)[0]


def tree_structure(tree) -> TreeDef:
    """The structure of tree, its leaves left out."""
    return tree_flatten(tree)[1]
