"""The logsumexp, gmm and MLP gradients of benches/ad.rs, timed in JAX.

Not part of the build and not a dependency of the project: a point of
comparison for docs/performance.md (issues 21 and 22). Same functions, sizes
and data as the harness (logsumexp: n = 100 000, x[i] = 3 sin(1.3 i); gmm:
1 000 points of 12 dimensions, 8 components, drawn with the harness's
xorshift64*, seed 21, in the same order; mlp: mlp_bulk.irad's mean softmax
cross-entropy of tanh(x W1 + b1) W2 + b2, batch 64, 784 -> 128 -> 10, W1 and
W2 stored input by output, gradient with respect to W1, b1, W2 and b2, data
drawn as handwritten::mlp_problem draws them: xorshift64*, seed 12, W1, b1,
W2, b2, x, then the labels as next_u64() % 10), float64, each function and
its gradient compiled with jax.jit, timed as the median of repeated calls
after a warm-up (each call waits for its result). XLA runs on one thread
unless --threads is given, as irad's and the Rust code do.

Run (any Python 3 with jax; a venv of one's own):

    python3 -m venv /tmp/jaxenv && /tmp/jaxenv/bin/pip install jax
    /tmp/jaxenv/bin/python benches/jax/ad_jax.py [--repeats N] [--threads]
    /tmp/jaxenv/bin/python benches/jax/ad_jax.py --case mlp       # one case (logsumexp, gmm, mlp)
    /tmp/jaxenv/bin/python benches/jax/ad_jax.py --gmm-args FILE   # gmm's arguments, for `irad run --args-file`
    /tmp/jaxenv/bin/python benches/jax/ad_jax.py --mlp-args FILE   # the MLP's, for `irad run --args-file`

It prints one line per case: primal and gradient medians and their ratio,
and the value (to compare with the harness's hand-written primal, or with
`irad run benches/programs/mlp_bulk.irad -f loss --args-file FILE` on the
arguments --mlp-args writes; likewise gmm).
"""

import argparse
import math
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=200, help="timed calls per variant")
    p.add_argument("--threads", action="store_true", help="let XLA use every core")
    p.add_argument("--n", type=int, default=100_000, help="logsumexp's size")
    p.add_argument("--case", default="logsumexp,gmm,mlp", help="the cases to run, comma-separated")
    p.add_argument("--gmm-args", metavar="FILE", help="write gmm's arguments in IR syntax and stop")
    p.add_argument("--mlp-args", metavar="FILE", help="write the MLP's arguments in IR syntax and stop")
    return p.parse_args()


ARGS = parse_args()
if not ARGS.threads:
    # Must be set before jax is imported.
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    )

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

MASK = (1 << 64) - 1


class XorShift:
    """xorshift64*, as benches/common/handwritten.rs has it."""

    def __init__(self, seed):
        self.state = ((seed * 0x9E3779B97F4A7C15) & MASK) | 1

    def next_u64(self):
        x = self.state
        x ^= x >> 12
        x ^= (x << 25) & MASK
        x ^= x >> 27
        self.state = x
        return (x * 0x2545F4914F6CDD1D) & MASK

    def next_f64(self):
        return (self.next_u64() >> 11) / float(1 << 53)

    def uniform(self, n, lo, hi):
        return np.array([lo + (hi - lo) * self.next_f64() for _ in range(n)])


def gmm_problem(n=1000, d=12, k=8, seed=21):
    """handwritten::gmm_problem: mu, logw, invs, then the points."""
    rng = XorShift(seed)
    mu = rng.uniform(k * d, -1.0, 1.0).reshape(k, d)
    logw = rng.uniform(k, -0.5, 0.5)
    invs = rng.uniform(k * d, 0.5, 1.5).reshape(k, d)
    x = rng.uniform(n * d, -1.5, 1.5).reshape(n, d)
    return mu, logw, invs, x


def mlp_problem(nb=64, nin=784, nh=128, nout=10, seed=12):
    """handwritten::mlp_problem: w1 (nin x nh), b1, w2 (nh x nout), b2, x (nb x nin), labels."""
    rng = XorShift(seed)
    r1 = 1.0 / math.sqrt(nin)
    r2 = 1.0 / math.sqrt(nh)
    w1 = rng.uniform(nin * nh, -r1, r1).reshape(nin, nh)
    b1 = rng.uniform(nh, -0.1, 0.1)
    w2 = rng.uniform(nh * nout, -r2, r2).reshape(nh, nout)
    b2 = rng.uniform(nout, -0.1, 0.1)
    x = rng.uniform(nb * nin, 0.0, 1.0).reshape(nb, nin)
    labels = np.array([rng.next_u64() % nout for _ in range(nb)], dtype=np.int64)
    return w1, b1, w2, b2, x, labels


def logsumexp(x):
    m = jnp.max(x)
    return jnp.log(jnp.sum(jnp.exp(x - m))) + m


def gmm(mu, logw, invs, x):
    """sum_i logsumexp_c (logw[c] + sum_j log invs[c, j] - 0.5 |(x_i - mu_c) invs_c|^2)."""
    z = (x[:, None, :] - mu[None, :, :]) * invs[None, :, :]  # n x k x d
    scores = logw + jnp.sum(jnp.log(invs), axis=1) - 0.5 * jnp.sum(z * z, axis=2)
    m = jnp.max(scores, axis=1, keepdims=True)
    return jnp.sum(jnp.log(jnp.sum(jnp.exp(scores - m), axis=1)) + m[:, 0])


def mlp(w1, b1, w2, b2, x, labels):
    """mean_b (logsumexp(z[b, :]) - z[b, labels[b]]) for z = tanh(x W1 + b1) W2 + b2."""
    h = jnp.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    m = jnp.max(z, axis=1, keepdims=True)
    lse = jnp.log(jnp.sum(jnp.exp(z - m), axis=1)) + m[:, 0]
    picked = jnp.take_along_axis(z, labels[:, None], axis=1)[:, 0]
    return jnp.mean(lse - picked)


def write_args(path, arrays):
    """The arrays as an IR argument list, `[1.5, ...], [0, 3, ...]` (f64 with repr, i64 as integers)."""

    def item(v):
        return repr(int(v)) if np.issubdtype(np.asarray(v).dtype, np.integer) else repr(float(v))

    with open(path, "w") as f:
        f.write(", ".join("[" + ", ".join(item(v) for v in np.ravel(a)) + "]" for a in arrays))
        f.write("\n")


def median_time(f, args, repeats):
    jax.block_until_ready(f(*args))
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def fmt(s):
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def report(name, primal, grad, args, repeats):
    value = float(primal(*args))
    tp = median_time(primal, args, repeats)
    tg = median_time(grad, args, repeats)
    print(f"{name:<10} primal {fmt(tp):>10}  grad {fmt(tg):>10}  grad/primal {tg / tp:.2f}  value {value!r}")


def main():
    if ARGS.gmm_args:
        write_args(ARGS.gmm_args, gmm_problem())
        return
    if ARGS.mlp_args:
        write_args(ARGS.mlp_args, mlp_problem())
        return
    cases = [c.strip() for c in ARGS.case.split(",")]
    unknown = [c for c in cases if c not in ("logsumexp", "gmm", "mlp")]
    if unknown:
        print(f"error: unknown case(s) {', '.join(unknown)} (cases: logsumexp, gmm, mlp)", file=sys.stderr)
        return 2
    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}, "
        f"{'all cores' if ARGS.threads else 'one thread'}, float64, "
        f"median of {ARGS.repeats}; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    if "logsumexp" in cases:
        x = jnp.array([3.0 * math.sin(1.3 * i) for i in range(ARGS.n)])
        report(
            f"logsumexp (n = {ARGS.n})",
            jax.jit(logsumexp),
            jax.jit(jax.grad(logsumexp)),
            (x,),
            ARGS.repeats,
        )
    if "gmm" in cases:
        args = tuple(jnp.array(a) for a in gmm_problem())
        report(
            "gmm (n = 1000, d = 12, k = 8)",
            jax.jit(gmm),
            jax.jit(jax.grad(gmm, argnums=(0, 1, 2))),
            args,
            ARGS.repeats,
        )
    if "mlp" in cases:
        args = tuple(jnp.array(a) for a in mlp_problem())
        report(
            "mlp (batch 64, 784-128-10)",
            jax.jit(mlp),
            jax.jit(jax.grad(mlp, argnums=(0, 1, 2, 3))),
            args,
            ARGS.repeats,
        )


if __name__ == "__main__":
    sys.exit(main())
