"""strata.nn.utils.parametrizations: weight_norm, spectral_norm and orthogonal as parametrizations
(torch.nn.utils.parametrizations)."""

from ... import _C
from ..._grad_mode import no_grad
from .. import functional as F
from ..modules.module import Module
from . import parametrize

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


def _norm_except_dim(v, pow=2, dim=0):
    """The p-norm of ``v`` over every dim but ``dim`` (kept with size 1 elsewhere); ``dim=-1`` is the whole norm."""
    if dim == -1:
        return v.norm(pow)
    dims = [d for d in range(v.dim()) if d != dim]
    if not dims:
        return v.abs() if pow != 0 else v
    return v.norm(pow, dims, True)


def _weight_norm(v, g, dim=0):
    """``v * g / ||v||`` with the norm over every dim but ``dim``."""
    return v * (g / _norm_except_dim(v, 2, dim))


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return _norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrises ``module.<name>`` as ``g * v / ||v||``: ``original0`` holds the magnitude ``g``, ``original1``
    the direction ``v``."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """``weight / sigma`` with ``sigma`` the largest singular value of ``weight`` (as a matrix over ``dim``),
    estimated by power iteration on the buffers ``_u`` and ``_v`` (one step per forward in training)."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(weight_mat.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(weight_mat.t().mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.dim() == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = u.vdot(weight_mat.mv(v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Reparametrises ``module.<name>`` divided by its spectral norm (``dim`` defaults to 0, 1 for transposed
    convolutions)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__ in ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d") else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# -- orthogonal ----------------------------------------------------------------------------------
# Note [Orthogonal parametrization]
# The weight (n x k, or a batch of them) is the image of an unconstrained tensor X under a map onto
# the matrices with orthonormal columns (rows when n < k: the map works on the transpose):
# - "matrix_exp" / "cayley": the skew-symmetric A = L - L^T built from X's lower triangle (padded to
#   n x n), mapped by exp(A) or the Cayley transform (I - A/2)^-1 (I + A/2); the first k columns.
# - "householder": the product of the Householder reflectors stored below X's diagonal (LAPACK's
#   geqrf form, tau = 2 / (1 + |v|^2)), with the columns' signs from X's diagonal.
# With use_trivialization (the default) the result is multiplied on the left by a buffer `base`,
# an orthogonal n x n matrix: assigning a weight stores it (completed to n x n) as the base and sets
# X to the point that maps to the identity, so the weight reads back as assigned and optimisation
# moves around it (a "dynamic trivialization").


def _st():
    import strata
    return strata


def _is_orthogonal(Q, eps=None):
    n, k = Q.size(-2), Q.size(-1)
    eye = _st().eye(k, dtype=Q.dtype)
    eps = 10.0 * n * _finfo_eps(Q.dtype) if eps is None else eps
    return bool(_st().allclose(Q.mT @ Q, eye, atol=eps, rtol=0.0))


def _finfo_eps(dtype):
    from ... import finfo
    return finfo(dtype).eps


def _make_orthogonal(A):
    """The Q of A's QR decomposition with R's diagonal made positive (unique when A has full rank)."""
    from ... import linalg
    Q, R = linalg.qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


class _Orthogonal(Module):
    _MAPS = ("matrix_exp", "cayley", "householder")

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if orthogonal_map not in self._MAPS:
            raise ValueError(f"orthogonal: orthogonal_map must be one of {self._MAPS}, got {orthogonal_map!r}")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        from ... import linalg
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                X = _st().cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mT
            if self.orthogonal_map == "matrix_exp":
                Q = linalg.matrix_exp(A)
            else:
                eye = _st().eye(n, dtype=A.dtype)
                Q = linalg.solve(eye - A * 0.5, eye + A * 0.5)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = linalg.householder_product(A, tau)
            # The diagonal of X gives each column's sign (zero -> +1, as an int cast of the diagonal).
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if getattr(self, "base", None) is not None:
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    @no_grad()
    def right_inverse(self, Q):
        if tuple(Q.shape) != tuple(self.shape):
            raise ValueError(f"Expected a matrix or batch of matrices of shape {tuple(self.shape)}. "
                             f"Got a tensor of shape {tuple(Q.shape)}.")
        Q_init = Q
        n, k = Q.size(-2), Q.size(-1)
        if n < k:
            Q = Q.mT
            n, k = k, n
        if "base" not in self._buffers:
            if self.orthogonal_map in ("matrix_exp", "cayley"):
                raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                          "parametrizations when use_trivialization=False.")
            # Not NotImplementedError: registration swallows that and would keep a raw X, whose diagonal
            # (the columns' signs) is not +-1.
            raise RuntimeError("orthogonal: the householder parametrization with use_trivialization=False "
                               "needs geqrf, which strata does not have yet (use_trivialization=True works)")
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:
            # Complete the columns to an n x n orthogonal matrix.
            N = _st().randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype)
            Q = _make_orthogonal(_st().cat([Q, N], dim=-1))
        self.base = Q
        # The point that maps to the identity: -I for the Householder map (its diagonal gives the signs,
        # and householder(0) is the identity), and any X with a zero skew part for the others.
        neg_eye = _st().zeros_like(Q_init)
        neg_eye.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_eye


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Reparametrises ``module.<name>`` (at least 2-D) as a matrix (or batch of matrices) with orthonormal
    columns, or rows when it is wide (Note [Orthogonal parametrization]). orthogonal_map: "matrix_exp",
    "cayley" or "householder"; default "matrix_exp" for square weights, "householder" otherwise."""
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if weight.dtype not in (_C.float32, _C.float64):
        raise NotImplementedError(f"orthogonal: weights of dtype {weight.dtype} are not supported "
                                  "(float32 and float64 are)")
    n, k = weight.size(-2), weight.size(-1)
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if n == k else "householder"
    parametrize.register_parametrization(module, name,
                                         _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization),
                                         unsafe=True)
    return module
