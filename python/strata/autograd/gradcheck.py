"""gradcheck / gradgradcheck: compare the gradients autograd computes with
central finite differences (use float64 or complex128 inputs).

Complex inputs and outputs are checked as pairs of real numbers (their
view_as_real): a complex input contributes the rows d/dx and d/dy of each
element, a complex output the columns of its real and imaginary parts. Under
torch's convention (Note [Complex gradients] in src/autograd) the gradient
autograd returns for a real loss L is dL/dx + i dL/dy, so seeding an output
element with 1 gives the row of its real part and seeding it with 1j the row of
its imaginary part: the same real Jacobian torch's gradcheck checks."""

import itertools

from .. import _C
from .._grad_mode import no_grad

_Tensor = _C.Tensor


class GradcheckError(RuntimeError):
    pass


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _float_outputs(out):
    return [o for o in _as_tuple(out) if isinstance(o, _Tensor) and (o.is_floating_point() or o.is_complex())]


def _real_numpy(t):
    """t's values as a flat float64 array; a complex t gives (re, im) pairs."""
    import numpy as np

    if t.is_complex():
        return np.ascontiguousarray(t.detach().numpy().astype(np.complex128)).view(np.float64).reshape(-1).copy()
    return t.detach().double().numpy().reshape(-1).copy()


def _real_target(x):
    """What the finite differences perturb: x, or for a complex x its real view (same storage)."""
    return _C._ops.view_as_real(x.detach()) if x.is_complex() else x


def _indices(t):
    return itertools.product(*[range(s) for s in t.shape])


def _numerical_jacobian(func, inputs, diff_idx, eps):
    import numpy as np

    def flat_outputs():
        # func runs with grad mode as the caller has it (gradgradcheck's func
        # calls autograd.grad inside); only the perturbations are unrecorded.
        return [_real_numpy(o) for o in _float_outputs(func(*inputs))]

    sizes = [o.size for o in flat_outputs()]
    jac = []  # jac[i] : (numel_in, total_out)
    for i in diff_idx:
        x = _real_target(inputs[i])
        cols = np.zeros((x.numel(), sum(sizes)))
        for k, idx in enumerate(_indices(x)):
            with no_grad():
                orig = x[idx].item()
                x[idx] = orig + eps
            plus = flat_outputs()
            with no_grad():
                x[idx] = orig - eps
            minus = flat_outputs()
            with no_grad():
                x[idx] = orig
            if sizes:
                cols[k] = np.concatenate([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
        jac.append(cols)
    return jac, sizes


def _analytical_jacobian(func, inputs, diff_idx, sizes):
    import numpy as np

    from . import grad as autograd_grad
    from .. import zeros_like

    outs = _float_outputs(func(*inputs))
    diff_inputs = [inputs[i] for i in diff_idx]
    jac = [np.zeros((inputs[i].numel() * (2 if inputs[i].is_complex() else 1), sum(sizes))) for i in diff_idx]
    col = 0
    for o in outs:
        seeds = (1.0, 1j) if o.is_complex() else (1.0,)
        if not o.requires_grad:
            col += o.numel() * len(seeds)
            continue
        for idx in _indices(o):
            for seed in seeds:
                g = zeros_like(o)
                g[idx] = seed
                gs = autograd_grad([o], diff_inputs, [g], retain_graph=True, allow_unused=True)
                for j, gi in enumerate(gs):
                    if gi is not None:
                        jac[j][:, col] = _real_numpy(gi)
                col += 1
    return jac


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True, fast_mode=False,
              masked=None):
    """True if the analytical and numerical Jacobians of func at inputs agree."""
    import numpy as np

    inputs = _as_tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, _Tensor) and x.requires_grad]
    if not diff_idx:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them "
                         "have requires_grad=True.")
    for i in diff_idx:
        if inputs[i].dtype._name not in ("float64", "complex128"):
            import warnings

            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. "
                          "This check will likely fail if all the inputs are not of double precision floating point.")
    numerical, sizes = _numerical_jacobian(func, inputs, diff_idx, eps)
    analytical = _analytical_jacobian(func, inputs, diff_idx, sizes)
    for j, (n, a) in enumerate(zip(numerical, analytical)):
        if not np.allclose(a, n, rtol=rtol, atol=atol, equal_nan=True):
            if not raise_exception:
                return False
            raise GradcheckError(f"Jacobian mismatch for output 0 with respect to input {diff_idx[j]},\n"
                                 f"numerical:{n}\nanalytical:{a}\n")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, gen_non_contig_grad_outputs=False,
                  raise_exception=True, nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
                  check_batched_grad=False, check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """gradcheck of the first derivative: checks second derivatives."""
    from . import grad as autograd_grad
    from .. import randn

    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        with no_grad():
            outs = _float_outputs(func(*inputs))
        grad_outputs = tuple(randn(*o.shape, dtype=o.dtype).requires_grad_() for o in outs)
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, _Tensor) and x.requires_grad]

    def first_derivative(*args):
        ins, gos = args[:n_in], args[n_in:]
        outs = _float_outputs(func(*ins))
        gs = autograd_grad(outs, [ins[i] for i in diff_idx], list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_derivative, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
