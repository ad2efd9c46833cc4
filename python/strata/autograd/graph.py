"""strata.autograd.graph: the Node type of the recorded graph."""

from .. import _C

Node = _C._Node
