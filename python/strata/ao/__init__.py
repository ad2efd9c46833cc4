"""strata.ao: torch.ao's quantization (dynamic quantization of nn.Linear; docs/SPARSE.md, "Quantized tensors")."""

from . import nn, quantization  # noqa: F401
