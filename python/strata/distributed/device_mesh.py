"""DeviceMesh: the world's ranks laid out in an n-dimensional array (torch.distributed.device_mesh).

Every rank of the world must appear in the mesh exactly once. For each mesh dimension the ranks that differ only
along it form a process group; the groups of one dimension are made with one communicator split of the default
group, so building a mesh is collective (every rank constructs it, in the same order). A one-dimensional mesh over
the world in rank order uses the default group itself.

`mesh["tp"]` (or `mesh[("dp", "tp")]`) is the sub-mesh holding this rank along the named dimensions: it shares the
parent's groups and makes no new communicator."""

import itertools

import strata

__all__ = ["DeviceMesh", "init_device_mesh"]


def _dist():
    from .. import distributed as dist

    return dist


def _nested_shape(ranks):
    shape = []
    x = ranks
    while isinstance(x, (list, tuple)):
        shape.append(len(x))
        x = x[0] if len(x) else None
    return tuple(shape)


def _flatten(ranks):
    if isinstance(ranks, (list, tuple)):
        return [r for x in ranks for r in _flatten(x)]
    return [int(ranks)]


def _split(dist, ranks_of_color, color, key):
    """One communicator split of the default group: this rank joins the group `ranks_of_color` (global ranks in
    group order) under `color`. Every rank of the world calls it once."""
    d = dist._default()
    comm = dist._C().comm_split(d._comm, color, key, d._timeout)
    pg = dist.ProcessGroup(comm, ranks_of_color, key, d._backend, d._timeout)
    dist._state.groups[pg] = None
    return pg


class DeviceMesh:
    """DeviceMesh(device_type, mesh, *, mesh_dim_names=None): `mesh` is a (nested) list or an integer tensor of
    global ranks; its shape is the mesh's shape."""

    def __init__(self, device_type, mesh, *, mesh_dim_names=None, _init_backend=True, _parent=None):
        dist = _dist()
        if isinstance(mesh, strata.Tensor):
            shape, flat = tuple(mesh.shape), [int(v) for v in mesh.reshape(-1).tolist()]
        else:
            shape, flat = _nested_shape(mesh), _flatten(mesh)
            if len(shape) == 0:
                raise ValueError(f"DeviceMesh: mesh must be a list or tensor of ranks, got {mesh!r}")
            n_expected = 1
            for s in shape:
                n_expected *= s
            if n_expected != len(flat):
                raise ValueError(f"DeviceMesh: mesh {mesh!r} is ragged (not a rectangular array of ranks)")
        if device_type != "cpu":
            raise ValueError(f"DeviceMesh: device_type {device_type!r} is not available (Strata's distributed "
                             "backend serves cpu tensors)")
        if mesh_dim_names is not None:
            mesh_dim_names = tuple(mesh_dim_names)
            if len(mesh_dim_names) != len(shape):
                raise ValueError(f"DeviceMesh: mesh_dim_names {mesh_dim_names} must name each of the mesh's "
                                 f"{len(shape)} dimensions (shape {shape})")
            if len(set(mesh_dim_names)) != len(mesh_dim_names):
                raise RuntimeError(f"DeviceMesh: mesh_dim_names {mesh_dim_names} must be unique")
        self.device_type = device_type
        self.mesh = strata.tensor(flat, dtype=strata.int64).reshape(shape) if shape else strata.tensor(flat)
        self.mesh_dim_names = mesh_dim_names
        self._shape = shape
        self._flat = flat
        if _parent is not None:  # a sub-mesh: groups, coordinate and root (the mesh it was cut from) given by the parent
            self._groups, self._coord, self._root = _parent
            return
        self._root = (self, tuple(range(len(shape))))
        if not dist.is_initialized():
            dist.init_process_group(dist.get_default_backend_for_device(device_type))
        n = dist.get_world_size()
        if sorted(flat) != list(range(n)):
            raise NotImplementedError(f"DeviceMesh: the mesh must hold every rank of the world once (0..{n - 1}); "
                                      f"got {self.mesh.tolist()}")
        me = dist.get_rank()
        idx = flat.index(me)
        coord = []
        for s in reversed(shape):
            coord.append(idx % s)
            idx //= s
        self._coord = list(reversed(coord))
        self._groups = []
        for d in range(len(shape)):
            if len(shape) == 1 and flat == list(range(n)):
                self._groups.append(dist.group.WORLD)
                continue
            # the ranks of this rank's line along dimension d, and a colour naming the line
            line = [self._rank_at(self._coord[:d] + [k] + self._coord[d + 1:]) for k in range(shape[d])]
            others = [c for j, c in enumerate(self._coord) if j != d]
            other_shape = [s for j, s in enumerate(shape) if j != d]
            color = 0
            for c, s in zip(others, other_shape):
                color = color * s + c
            self._groups.append(_split(dist, line, color, self._coord[d]))

    def _rank_at(self, coord):
        idx = 0
        for c, s in zip(coord, self._shape):
            idx = idx * s + c
        return self._flat[idx]

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def shape(self):
        return tuple(self._shape)

    def size(self, mesh_dim=None):
        if mesh_dim is None:
            return len(self._flat)
        return self._shape[self._dim(mesh_dim)]

    def _dim(self, mesh_dim, op="DeviceMesh"):
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError(f"{op}: the mesh has {self.ndim} dimensions {self._names()}; name the one "
                                   "wanted (mesh_dim)")
            return 0
        if isinstance(mesh_dim, str):
            if self.mesh_dim_names is None or mesh_dim not in self.mesh_dim_names:
                raise KeyError(f"{op}: no mesh dimension named {mesh_dim!r} (the mesh's dimensions are "
                               f"{self._names()})")
            return self.mesh_dim_names.index(mesh_dim)
        if isinstance(mesh_dim, int) and -self.ndim <= mesh_dim < self.ndim:
            return mesh_dim % self.ndim
        raise ValueError(f"{op}: no mesh dimension {mesh_dim!r} (the mesh has {self.ndim}, named "
                         f"{self.mesh_dim_names})")

    def _names(self):
        return self.mesh_dim_names if self.mesh_dim_names is not None else tuple(range(self.ndim))

    def get_group(self, mesh_dim=None):
        return self._groups[self._dim(mesh_dim, "DeviceMesh.get_group")]

    def get_all_groups(self):
        return list(self._groups)

    def get_rank(self):
        return _dist().get_rank()

    def get_local_rank(self, mesh_dim=None):
        return self._coord[self._dim(mesh_dim, "DeviceMesh.get_local_rank")]

    def get_coordinate(self):
        return list(self._coord)

    def __getitem__(self, names):
        if isinstance(names, str):
            names = (names,)
        names = tuple(names)
        if self.mesh_dim_names is None:
            raise RuntimeError("DeviceMesh: cannot slice a mesh without mesh_dim_names")
        dims = [self._dim(nm, "DeviceMesh.__getitem__") for nm in names]
        if dims != sorted(dims) or len(set(dims)) != len(dims):
            raise KeyError(f"DeviceMesh.__getitem__: {names} must be distinct dimensions in the mesh's order "
                           f"{self.mesh_dim_names}")
        if dims == list(range(self.ndim)):
            return self
        # this rank's slice: the other dimensions fixed at its coordinate
        sub_shape = [self._shape[d] for d in dims]
        ranks = []
        for idx in itertools.product(*[range(s) for s in sub_shape]):
            c = list(self._coord)
            for d, k in zip(dims, idx):
                c[d] = k
            ranks.append(self._rank_at(c))
        nested = strata.tensor(ranks, dtype=strata.int64).reshape(sub_shape)
        root, root_dims = self._root
        return DeviceMesh(self.device_type, nested, mesh_dim_names=names,
                          _parent=([self._groups[d] for d in dims], [self._coord[d] for d in dims],
                                   (root, tuple(root_dims[d] for d in dims))))

    def __eq__(self, other):
        return isinstance(other, DeviceMesh) and self._flat == other._flat and self._shape == other._shape and \
            self.mesh_dim_names == other.mesh_dim_names

    def __hash__(self):
        return hash((tuple(self._flat), self._shape, self.mesh_dim_names))

    def __repr__(self):
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self.mesh.tolist()}{names})"


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    """A mesh of shape mesh_shape over the world's ranks in row-major order, starting the default group if needed.
    Collective: every rank calls it."""
    dist = _dist()
    shape = tuple(int(s) for s in mesh_shape)
    if mesh_dim_names is not None and len(mesh_dim_names) != len(shape):
        raise RuntimeError(f"init_device_mesh: mesh_dim_names {tuple(mesh_dim_names)} must have as many names as "
                           f"mesh_shape {shape}")
    if len(shape) == 0 or any(s <= 0 for s in shape):
        raise ValueError(f"init_device_mesh: mesh_shape {shape} must hold positive sizes")
    if not dist.is_initialized():
        dist.init_process_group(dist.get_default_backend_for_device(device_type))
    n = dist.get_world_size()
    total = 1
    for s in shape:
        total *= s
    if total != n:
        raise RuntimeError(f"init_device_mesh: mesh_shape {shape} holds {total} ranks, but the world has {n}")
    ranks = strata.arange(n, dtype=strata.int64).reshape(shape)
    return DeviceMesh(device_type, ranks, mesh_dim_names=mesh_dim_names)
