"""jax.scipy over vtape's tensors: linalg, special and stats (`import vtape.scipy as jsp`)."""

from . import linalg, special, stats  # noqa: F401
