"""parallelize_module (torch.distributed.tensor.parallel.parallelize_module)."""

import fnmatch

from .style import ParallelStyle

__all__ = ["parallelize_module"]


def parallelize_module(module, device_mesh=None, parallelize_plan=None, *, src_data_rank=0):
    """Applies `parallelize_plan` (a ParallelStyle, or a dict from module paths to styles; a path's parts may hold
    fnmatch wildcards such as "layers.*.mlp") on a 1-D mesh (pass mesh["tp"] of a larger mesh). Parameters are taken
    from global rank src_data_rank. Returns the module."""
    from .._api import _default_mesh

    mesh = device_mesh if device_mesh is not None else _default_mesh()
    if mesh.ndim != 1:
        raise ValueError(f"parallelize_module: tensor parallelism needs a 1-D mesh, got {mesh.ndim} dimensions "
                         f"{mesh.mesh_dim_names}; pass a sub-mesh such as mesh['tp']")
    if src_data_rank != 0:
        raise NotImplementedError("parallelize_module: src_data_rank other than 0 is not supported")
    if parallelize_plan is None:
        return module
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan._apply(module, mesh)
        return module
    if not isinstance(parallelize_plan, dict):
        raise TypeError(f"parallelize_module: parallelize_plan must be a ParallelStyle or a dict, got "
                        f"{type(parallelize_plan).__name__}")
    for path, style in parallelize_plan.items():
        if not isinstance(style, ParallelStyle):
            raise TypeError(f"parallelize_module: the plan for {path!r} must be a ParallelStyle, got {style!r}")
        if path == "":
            style._apply(module, mesh)
            continue
        atoms = path.split(".")
        found = [m for name, m in module.named_modules() if name and _matches(name.split("."), atoms)]
        if not found:
            raise ValueError(f"parallelize_module: the plan names {path!r}, which matches no submodule of "
                             f"{type(module).__name__}")
        for m in found:
            style._apply(m, mesh)
    return module


def _matches(parts, atoms):
    return len(parts) == len(atoms) and all(fnmatch.fnmatchcase(p, a) for p, a in zip(parts, atoms))
