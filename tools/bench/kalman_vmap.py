"""A Matern-3/2 Kalman filter by lax.scan (a 2-number state), written as a JAX user writes it, under
jit(vmap(value_and_grad)) over B parameter vectors: the same code under vtape or JAX (--jax).

  PYTHONPATH=build/python OMP_NUM_THREADS=1 taskset -c 0 python3 tools/bench/kalman_vmap.py --n 2000 --batch 8
  taskset -c 0 python3 tools/bench/kalman_vmap.py --jax --n 2000 --batch 8

Prints the median time of --calls steady calls (after the first) and the first example's log-likelihood.
"""

import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "zoo" / "jax"))
from kalman import matern32_kalman  # noqa: E402  (the zoo's twin, written against any numpy and lax)

parser = argparse.ArgumentParser()
parser.add_argument("--jax", action="store_true")
parser.add_argument("--n", type=int, default=2000)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--calls", type=int, default=5)
args = parser.parse_args()

if args.jax:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax import lax

    library = jax
else:
    import vtape as library
    import vtape.numpy as jnp
    from vtape import lax


rng = np.random.default_rng(0)
y = np.sin(np.arange(args.n) * 0.1) + 0.1 * rng.standard_normal(args.n)
thetas = np.log(np.array([[1.0, 1.0, 0.1]] * args.batch)) + 0.1 * rng.standard_normal((args.batch, 3))
f = library.jit(library.vmap(library.value_and_grad(lambda theta, y: matern32_kalman(theta, y, jnp, lax)),
                             in_axes=(0, None)))
start = time.perf_counter()
value, _ = f(thetas, y)
first = time.perf_counter() - start
times = []
for _ in range(args.calls):
    start = time.perf_counter()
    value, gradient = f(thetas, y)
    np.asarray(gradient)  # JAX's calls return before the work is done
    times.append(time.perf_counter() - start)
print(f"{'jax' if args.jax else 'vtape'} n={args.n} B={args.batch}: {np.median(times) * 1e3:.1f} ms a call "
      f"(first {first * 1e3:.0f} ms), loglik[0] {float(np.asarray(value)[0]):.9f}")
