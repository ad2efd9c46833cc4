"""rpc.functions.async_execution (torch.distributed.rpc.functions)."""

import functools

__all__ = ["async_execution"]


def async_execution(fn):
    """Marks `fn` as returning a strata.futures.Future when it runs as the target of an RPC: the callee replies
    with the Future's value once it completes, and the executor thread is free meanwhile. Put it inside
    @staticmethod / @classmethod."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    wrapper._wrapped_async_rpc_function = fn
    return wrapper
