"""JAX twin of zoo::pta_segment (tools/bench/zoo/models/pta.cpp): per-epoch sums by segment_sum over epoch ids."""
import _pta  # tools/bench/zoo/jax/, on the path zoo_jax.py sets


def make(data_dir):
    return _pta.make(data_dir, shared=False)
