"""Models written for JAX run under vtape with their import lines changed: jit(vmap(value_and_grad(model))) under both,
against JAX when it is installed, else against JAX's values stored by tools/reference/make_port_reference.py."""

import pathlib

import numpy as np
import pytest

import vtape as vt
import vtape.numpy as jnp
from vtape import lax
import vtape.scipy as jsp

from jax_ports import MODELS, parameters

REFERENCE = pathlib.Path(__file__).parent / "data" / "ports.npz"


def vtape_values(name):
    model, data, _ = MODELS[name]
    f = vt.jit(vt.vmap(vt.value_and_grad(lambda p: model(jnp, lax, jsp, p, *data))))
    value, grad = f(parameters(name))
    return np.asarray(value), np.asarray(grad), f


def jax_values(name):
    try:
        import jax
    except ImportError:
        stored = np.load(REFERENCE)
        return stored[f"{name}_value"], stored[f"{name}_grad"]
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jjnp
    import jax.scipy as jjsp
    from jax import lax as jlax

    model, data, _ = MODELS[name]
    value, grad = jax.jit(jax.vmap(jax.value_and_grad(lambda p: model(jjnp, jlax, jjsp, p, *data))))(parameters(name))
    return np.asarray(value), np.asarray(grad)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_jax_model_runs_under_vtape_with_its_imports_changed(name):
    value, grad, f = vtape_values(name)
    want_value, want_grad = jax_values(name)
    np.testing.assert_allclose(value, want_value, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-9, atol=1e-10)
    # Another batch size: the same plan, no new trace.
    f(parameters(name, 7))
    assert f.counters()["traces"] == 1
