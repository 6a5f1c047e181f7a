"""JAX twin of zoo::pta_shared (tools/bench/zoo/models/pta.cpp): per-epoch sums as products by the shared 7758 x 360
TOA x epoch indicator."""
import _pta  # tools/bench/zoo/jax/, on the path zoo_jax.py sets


def make(data_dir):
    return _pta.make(data_dir, shared=True)
