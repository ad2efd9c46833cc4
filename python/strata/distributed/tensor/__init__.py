"""strata.distributed.tensor: DTensor over an n-D DeviceMesh (torch.distributed.tensor), without op interception:
a DTensor is its local shard plus the mesh, placements and global shape (see _api.py and docs/DISTRIBUTED.md)."""

from ..device_mesh import DeviceMesh, init_device_mesh
from ._api import DTensor, distribute_module, distribute_tensor
from .placement_types import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "DeviceMesh", "distribute_tensor", "distribute_module", "init_device_mesh", "Shard",
           "Replicate", "Partial", "Placement"]
