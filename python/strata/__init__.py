"""Strata: a deep-learning framework with a C++ core and PyTorch's Python API.

``import strata as torch`` runs ordinary torch code over the surface Strata
implements. Every op is declared once in the C++ op table (src/ops/decl) and
reaches Python through one generic binding (``strata._C._ops``); this package
adds the Python-only conveniences on top.
"""

from . import _C
from ._C import Tensor, device, dtype
from ._C import (  # noqa: F401  (dtype objects)
    bool,
    uint8,
    int8,
    int16,
    int32,
    int64,
    float16,
    bfloat16,
    float32,
    float64,
    uint16,
    uint32,
    uint64,
    complex64,
    complex128,
    float8_e4m3fn,
    float8_e5m2,
    float8_e4m3fnuz,
    float8_e5m2fnuz,
    float8_e8m0fnu,
)
from ._C import get_default_dtype, set_default_dtype, get_num_threads, set_num_threads, promote_types, result_type

# PyTorch's dtype aliases.
half = float16
float = float32  # noqa: A001
double = float64
cfloat = complex64
cdouble = complex128
short = int16
int = int32  # noqa: A001
long = int64

from ._size import Size  # noqa: E402
from ._functions import *  # noqa: E402,F401,F403
from ._functions import __all__ as _fn_all  # noqa: E402
from . import _tensor  # noqa: E402,F401  (attaches Tensor methods)
from ._math_more import *  # noqa: E402,F401,F403  (torch's aliases: clip, arccos, multiply, ...; positive, rsub)
from ._shape import split, chunk, nonzero, where  # noqa: E402,F401  (Python-only forms of the shape ops)
from ._misc_more import *  # noqa: E402,F401,F403  (einsum, unique, meshgrid, ...: variadic and tuple forms)
from . import linalg  # noqa: E402,F401  (strata.linalg)
from ._linalg_torch import *  # noqa: E402,F401,F403  (torch.inverse, torch.det, torch.svd, ... and their Tensor methods)
from ._creation import *  # noqa: E402,F401,F403  (torch-signature factories, random, strata.random)
from . import _tensor_views  # noqa: E402,F401  (view properties, in-place view methods)
from . import nn  # noqa: E402,F401
from .nn._functional_nn_ops import (  # noqa: E402,F401  (torch.max_pool1d, torch.pixel_shuffle, ...)
    max_pool1d, max_pool3d, pixel_shuffle, pixel_unshuffle, channel_shuffle)
from ._grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode  # noqa: E402
from . import blas  # noqa: E402,F401  (strata.blas: BLAS routines as ops)
from . import _out  # noqa: E402  (out= of ops whose schema has none: Note in op_bind.cpp)
_C._set_out_fallback(_out.fallback)
from . import _tensor_autograd  # noqa: E402,F401  (Tensor.backward, Tensor.register_hook)
from . import autograd  # noqa: E402,F401
from . import amp  # noqa: E402,F401
from . import special  # noqa: E402,F401  (strata.special)
from . import fft  # noqa: E402,F401  (strata.fft)
from .fft._stft import stft, istft, _fft_c2c, _fft_r2c, _fft_c2r  # noqa: E402,F401  (and Tensor.stft/istft)
from . import distributions  # noqa: E402,F401  (strata.distributions)
from .distributions.utils import _standard_gamma, _standard_gamma_grad  # noqa: E402,F401
from .amp import autocast, is_autocast_enabled, get_autocast_dtype  # noqa: E402,F401

from . import ops  # noqa: E402,F401  (strata.ops.load_library, strata.ops.<namespace>.<op>)
from . import optim  # noqa: E402,F401
from . import utils  # noqa: E402,F401
from . import _tensor_pickle  # noqa: E402,F401  (pickle, copy and deepcopy of tensors)
from .serialization import save, load  # noqa: E402,F401  (torch zip and safetensors checkpoints)
from .profiler import set_warn_on, HiddenCopyWarning  # noqa: E402,F401  (strata.profiler)

from . import _tensor_compat  # noqa: E402,F401  (Tensor.type/new/cuda/pin_memory/__format__)
from ._legacy_types import *  # noqa: E402,F401,F403  (strata.FloatTensor, ...)
from ._settings import *  # noqa: E402,F401,F403  (default device, determinism, matmul precision)
from . import backends, cuda, mps, accelerator, jit, compiler, version, distributed  # noqa: E402,F401
from . import xpu  # noqa: E402,F401  (strata.xpu: no XPU backend, answers as torch without one)

__version__ = version.__version__

from ._surface_more import *  # noqa: E402,F401,F403  (hstack, tensor_split, windows, finfo, flags)
from . import _tensor_surface  # noqa: E402,F401  (apply_, resize_, set_, storage(), H/mH, memory formats)
from . import multiprocessing, testing  # noqa: E402,F401
from ._names_more import *  # noqa: E402,F401,F403  (*_copy view variants, cov/corrcoef, set_default_tensor_type)
from .func._vmap import vmap  # noqa: E402,F401  (the Vmap dispatch key: docs/VMAP.md)
from . import func  # noqa: E402,F401  (strata.func: grad, vjp, jvp, jacrev, jacfwd, hessian, functional_call)
from .nn.utils import stateless as _stateless  # noqa: E402,F401  (torch.nn.utils.stateless.functional_call)
from . import hub, futures  # noqa: E402,F401  (strata.hub: the hub cache, no downloads; strata.futures)

from . import _dynamo  # noqa: E402,F401  (strata.compile's capture: strata._dynamo, as torch._dynamo)
from . import export, onnx  # noqa: E402,F401  (strata.export: ahead-of-time graphs; strata.onnx: ONNX export)
from . import fx  # noqa: E402,F401  (strata.fx: symbolic tracing and graph rewriting, as torch.fx; docs/FX.md)


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """Captures a function or module into graphs (docs/COMPILE.md): the first call runs the
    bytecode symbolically on Meta tensors, records the strata ops into a graph guarded by what it
    assumed, and later calls whose guards hold run the graph from C++. Unsupported Python splits
    the function at a graph break (or raises with fullgraph=True). backend: "inductor" (the
    default, the same as "strata_cpp": fused groups become generated C++ kernels, training graphs go
    through AOT autograd, anything else runs node by node), "eager" (the graph's node-by-node C++
    runner), "aot_eager", or a callable (graph_module, example_inputs) -> callable. mode: None /
    "default", "reduce-overhead" (the kernel outputs' arena is made once and reused),
    "max-autotune" and "max-autotune-no-cudagraphs" (each kernel's loop variants and each GEMM's route are
    timed on the captured shapes and the fastest kept, cached on disk; results as "default");
    options is accepted and ignored. dynamic: None (sizes that change become symbolic on the second compile), True
    (every dim of every tensor argument symbolic from the first call), False (sizes specialized);
    see docs/COMPILE.md, "Symbolic sizes"."""
    from ._dynamo import eval_frame as _ef
    from ._dynamo.backends import lookup_backend as _lookup
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    _lookup(backend)
    if disable:
        return model
    opts = {"fullgraph": fullgraph, "dynamic": dynamic, "backend": backend, "mode": mode, "options": options}
    from .nn.modules.module import Module as _Module
    import types as _types
    if isinstance(model, _Module):
        return _ef.optimized_module(model, opts)
    if isinstance(model, _types.MethodType) and isinstance(model.__func__, _types.FunctionType):
        return _types.MethodType(_ef.compile_function(model.__func__, opts), model.__self__)
    if isinstance(model, _types.FunctionType):
        return _ef.compile_function(model, opts)
    call = getattr(type(model), "__call__", None)
    if isinstance(call, _types.FunctionType):
        return _types.MethodType(_ef.compile_function(call, opts), model)
    raise TypeError(f"strata.compile: expected a function or an nn.Module, got {type(model).__name__}")


# torch's constants, and its out-of-memory exception (raised by the allocator; a RuntimeError as torch's and a
# MemoryError as Python's).
import math as _math  # noqa: E402

pi, e, inf, nan = _math.pi, _math.e, _math.inf, _math.nan
OutOfMemoryError = _C._OutOfMemoryError

from . import storage  # noqa: E402,F401  (UntypedStorage, TypedStorage, the legacy FloatStorage, ...)
from .storage import TypedStorage, UntypedStorage  # noqa: E402,F401
globals().update(storage.LEGACY_STORAGES)
from ._surface_extra import TensorType, classes, pca_lowrank, svd_lowrank, symeig  # noqa: E402,F401

# Sparse COO tensors (docs/SPARSE.md): the layout, the constructor, strata.sparse, the Tensor methods.
from ._sparse import sparse_coo, sparse_coo_tensor, _sparse_coo_tensor_unsafe  # noqa: E402,F401
from . import sparse  # noqa: E402,F401
# Nested tensors in the jagged layout (docs/NESTED.md): the layout, strata.nested, the Tensor methods.
from ._nested import jagged  # noqa: E402,F401
from . import nested  # noqa: E402,F401
spmm = sparse.spmm
# Affine-quantized tensors and dynamic quantization (docs/SPARSE.md, "Quantized tensors").
from ._quantized import (qint8, quint8, qint32, qscheme, per_tensor_affine, per_channel_affine,  # noqa: E402,F401
                         per_tensor_symmetric, per_channel_symmetric, per_channel_affine_float_qparams,
                         quantize_per_tensor, quantize_per_channel, quantize_per_tensor_dynamic, dequantize,
                         int_repr)
from . import ao  # noqa: E402,F401
from .ao import quantization  # noqa: E402,F401  (torch.quantization is torch.ao.quantization's old name)
import sys as _sys  # noqa: E402
_sys.modules[__name__ + ".quantization"] = quantization
nn.quantized = ao.nn.quantized  # torch.nn.quantized(.dynamic): the old home of torch.ao.nn.quantized
_sys.modules[__name__ + ".nn.quantized"] = ao.nn.quantized
_sys.modules[__name__ + ".nn.quantized.dynamic"] = ao.nn.quantized.dynamic

# A torch name Strata lacks raises "not implemented yet" rather than a bare
# AttributeError (strata/_missing.py): every strata module gets a miss hook,
# and Tensor placeholders, once every module above has attached its methods.
from . import _missing  # noqa: E402

_missing.install_module_hooks(__name__)
_missing.install_excepthook()
_missing.install_tensor_placeholders(Tensor)
