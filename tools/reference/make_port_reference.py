#!/usr/bin/env python3
"""JAX's values and gradients of the ported models (python/tests/jax_ports.py), for test_ports.py where JAX is not
installed: python/tests/data/ports.npz. Needs jax (pip install jax).

    python3 tools/reference/make_port_reference.py
"""
import pathlib
import sys

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy as jsp  # noqa: E402
from jax import lax  # noqa: E402

tests = pathlib.Path(__file__).resolve().parents[2] / "python" / "tests"
sys.path.insert(0, str(tests))
from jax_ports import MODELS, parameters  # noqa: E402

out = {}
for name, (model, data, _) in MODELS.items():
    value, grad = jax.jit(jax.vmap(jax.value_and_grad(lambda p: model(jnp, lax, jsp, p, *data))))(parameters(name))
    out[f"{name}_value"], out[f"{name}_grad"] = np.asarray(value), np.asarray(grad)
np.savez(tests / "data" / "ports.npz", **out)
print(f"wrote {tests / 'data' / 'ports.npz'} (jax {jax.__version__})")
