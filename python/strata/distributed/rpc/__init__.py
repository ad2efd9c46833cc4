"""strata.distributed.rpc: torch.distributed.rpc for CPU tensors, over Strata's own TCP transport (docs/DISTRIBUTED.md,
"RPC"): init_rpc / shutdown, rpc_sync / rpc_async / remote, RRef, WorkerInfo, TensorPipeRpcBackendOptions,
functions.async_execution."""

from . import functions  # noqa: F401
from ._agent import DEFAULT_RPC_TIMEOUT_SEC, UNSET_RPC_TIMEOUT, WorkerInfo  # noqa: F401
from .api import (  # noqa: F401
    BackendType, RpcBackendOptions, RRef, TensorPipeRpcBackendOptions, get_worker_info, init_rpc, is_available,
    remote, rpc_async, rpc_sync, shutdown)

__all__ = ["init_rpc", "shutdown", "rpc_sync", "rpc_async", "remote", "get_worker_info", "RRef", "WorkerInfo",
           "BackendType", "RpcBackendOptions", "TensorPipeRpcBackendOptions", "functions", "is_available"]


class constants:
    DEFAULT_RPC_TIMEOUT_SEC = DEFAULT_RPC_TIMEOUT_SEC
    UNSET_RPC_TIMEOUT = UNSET_RPC_TIMEOUT
    DEFAULT_NUM_WORKER_THREADS = 16
    DEFAULT_INIT_METHOD = "env://"
    DEFAULT_SHUTDOWN_TIMEOUT = 0.0
