"""A one-dimensional DeviceMesh over the world (torch.distributed.device_mesh, the 1-D case only)."""

import strata

__all__ = ["DeviceMesh", "init_device_mesh"]


class DeviceMesh:
    """The ranks of the world laid out in one dimension; its group is the default process group."""

    def __init__(self, device_type, mesh, *, mesh_dim_names=None, _init_backend=True):
        from .. import distributed as dist

        ranks = mesh.tolist() if isinstance(mesh, strata.Tensor) else list(mesh)
        if any(isinstance(r, (list, tuple)) for r in ranks):
            raise NotImplementedError("DeviceMesh: only one-dimensional meshes are supported by Strata")
        if device_type != "cpu":
            raise ValueError(f"DeviceMesh: device_type {device_type!r} is not available (Strata's distributed "
                             "backend serves cpu tensors)")
        if not dist.is_initialized():
            dist.init_process_group(dist.get_default_backend_for_device(device_type))
        n = dist.get_world_size()
        if sorted(ranks) != list(range(n)):
            raise NotImplementedError(f"DeviceMesh: the mesh must hold every rank of the world once (0..{n - 1}); "
                                      f"got {ranks}")
        if mesh_dim_names is not None and len(mesh_dim_names) != 1:
            raise ValueError(f"DeviceMesh: mesh_dim_names {mesh_dim_names} must name the mesh's 1 dimension")
        self.device_type = device_type
        self.mesh = strata.tensor(ranks, dtype=strata.int64)
        self.mesh_dim_names = tuple(mesh_dim_names) if mesh_dim_names is not None else None
        self._group = dist.group.WORLD if ranks == list(range(n)) else dist.new_group(ranks)

    @property
    def ndim(self):
        return 1

    @property
    def shape(self):
        return (self.mesh.numel(),)

    def size(self, mesh_dim=None):
        return self.mesh.numel()

    def _dim(self, mesh_dim):
        if mesh_dim is None or mesh_dim == 0 or mesh_dim == -1:
            return 0
        if self.mesh_dim_names is not None and mesh_dim in self.mesh_dim_names:
            return 0
        raise ValueError(f"DeviceMesh: no dimension {mesh_dim!r} (the mesh has 1, named {self.mesh_dim_names})")

    def get_group(self, mesh_dim=None):
        self._dim(mesh_dim)
        return self._group

    def get_all_groups(self):
        return [self._group]

    def get_rank(self):
        from .. import distributed as dist

        return dist.get_rank()

    def get_local_rank(self, mesh_dim=None):
        from .. import distributed as dist

        self._dim(mesh_dim)
        return dist.get_rank(self._group)

    def get_coordinate(self):
        return [self.get_local_rank()]

    def __getitem__(self, name):
        self._dim(name)
        return self

    def __repr__(self):
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self.mesh.tolist()}{names})"


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    """A 1-D mesh of mesh_shape[0] ranks (the world's size), starting the default group if needed."""
    from .. import distributed as dist

    shape = tuple(mesh_shape)
    if len(shape) != 1:
        raise NotImplementedError(f"init_device_mesh: only one-dimensional meshes are supported by Strata, got shape "
                                  f"{shape}")
    if mesh_dim_names is not None and len(mesh_dim_names) != len(shape):
        raise RuntimeError(f"init_device_mesh: mesh_dim_names {tuple(mesh_dim_names)} must have as many names as "
                           f"mesh_shape {shape}")
    if not dist.is_initialized():
        dist.init_process_group(dist.get_default_backend_for_device(device_type))
    n = dist.get_world_size()
    if shape[0] != n:
        raise RuntimeError(f"init_device_mesh: mesh_shape {shape} holds {shape[0]} ranks, but the world has {n}")
    return DeviceMesh(device_type, list(range(n)), mesh_dim_names=mesh_dim_names)
