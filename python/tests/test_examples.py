"""The Python examples run, and compute what they say."""

import pathlib
import runpy

import numpy as np

import vtape as vt

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def test_the_readme_tour():
    g = runpy.run_path(str(EXAMPLES / "demo.py"), run_name="demo")
    assert g["step"].counters()["traces"] == 1  # two batch sizes, one trace
    assert g["grads"].shape == (3, 3) and g["values"].shape == (3,)
    want = float(g["lml"](np.zeros(3)))
    np.testing.assert_allclose(np.asarray(g["values"]), [want] * 3, rtol=1e-12)
    H = np.asarray(g["H"])
    np.testing.assert_allclose(H, H.T, rtol=1e-10)
    grad = lambda t: np.asarray(vt.grad(g["lml"])(t))  # noqa: E731
    fd = np.stack([(grad(1e-6 * e) - grad(-1e-6 * e)) / 2e-6 for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-7)
