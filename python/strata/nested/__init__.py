"""strata.nested: nested tensors in torch's jagged layout (docs/NESTED.md)."""

from .._nested import (as_nested_tensor, jagged, narrow, nested_tensor, nested_tensor_from_jagged,  # noqa: F401
                       to_padded_tensor)

__all__ = ["nested_tensor", "as_nested_tensor", "nested_tensor_from_jagged", "narrow", "to_padded_tensor"]
