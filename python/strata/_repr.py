"""PyTorch-style printing of tensors."""


def tensor_repr(t):
    dt = "" if t.dtype.__repr__() in ("strata.float32", "strata.int64", "strata.bool") else f", dtype={t.dtype!r}"
    if t.device.type == "meta":
        return f"tensor(..., device='meta', size={tuple(t.shape)}{dt})"
    return f"tensor({t.tolist()}{dt})"
