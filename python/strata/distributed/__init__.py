"""strata.distributed: multi-process training, not implemented yet.

Answers as torch's builds without distributed support do: `is_available()` is
False, so the usual guard (`dist.is_available() and dist.is_initialized()`)
takes the single-process path; `is_initialized()` is False, since no process
group can be made. Every other torch.distributed name raises "not implemented
yet" (strata/_missing.py)."""

__all__ = ["is_available", "is_initialized"]


def is_available():
    return False


def is_initialized():
    return False
