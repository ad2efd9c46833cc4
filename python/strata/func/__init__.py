"""strata.func: torch.func's function transforms (docs/FUNC.md).

grad, grad_and_value, vjp, jvp, linearize, jacrev, jacfwd and hessian are built on the
tape autograd (strata.autograd.grad with create_graph), one level per transform;
functional_call runs a module with swapped-in parameters and buffers, and
stack_module_state stacks the state of an ensemble of modules.
"""

from ._transforms import grad, grad_and_value, vjp, jvp, linearize, jacrev, jacfwd, hessian  # noqa: F401
from ._functional_call import functional_call, stack_module_state  # noqa: F401
from ._misc import functionalize, replace_all_batch_norm_modules_, debug_unwrap  # noqa: F401
from ._vmap import vmap  # noqa: F401  (the Vmap dispatch key: docs/VMAP.md)

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian",
           "functional_call", "stack_module_state", "vmap", "functionalize", "replace_all_batch_norm_modules_",
           "debug_unwrap"]
