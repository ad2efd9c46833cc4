"""strata.version: build facts in torch.version's names. There is no CUDA or
ROCm backend, so `cuda` and `hip` are None, which is what scripts test."""

__version__ = "0.1.0"
cuda = None
hip = None
debug = False
git_version = "unknown"
