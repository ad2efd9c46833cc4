"""strata.fx.passes.split_module: split_module(m, root_m, split_callback) cuts a GraphModule into
submodules ``submod_<id>`` by a partition id per node, and returns a GraphModule that calls them in
dependency order. Each call_* node goes to ``split_callback(node)``'s partition; placeholders and
get_attr nodes stay in the top-level graph and are passed to the partitions that read them (as torch
does); a value computed in one partition and read in another (or returned) becomes an output of the
first (a tuple when there are several) and an input of the second."""

from __future__ import annotations

import inspect
import operator
from typing import Any, Callable, Dict, List, Optional

from ..graph import Graph
from ..graph_module import GraphModule
from ..node import Node, map_arg

__all__ = ["split_module", "Partition"]


class Partition:
    def __init__(self, name: str):
        self.name = name
        self.submod_name = f"submod_{name}"
        self.node_names: List[str] = []
        self.inputs: Dict[str, None] = {}
        self.outputs: Dict[str, None] = {}
        self.dependencies: Dict[str, None] = {}
        self.dependents: Dict[str, None] = {}
        self.graph = Graph()
        self.environment: Dict[Node, Node] = {}
        self.targets: Dict[str, Any] = {}

    def __repr__(self):
        return (f"name: {self.name},\n nodes: {self.node_names},\n inputs: {list(self.inputs)},\n outputs: "
                f"{list(self.outputs)},\n partitions depended on: {list(self.dependencies)},\n partition "
                f"dependents: {list(self.dependents)}")


def split_module(m: GraphModule, root_m, split_callback: Callable[[Node], int],
                 qualname_map: Optional[Dict[str, str]] = None, keep_original_order: bool = False,
                 keep_original_node_name: bool = False) -> GraphModule:
    """Splits ``m`` (traced from ``root_m``) into one submodule per partition id (see the module doc)."""
    partitions: Dict[str, Partition] = {}
    part_of: Dict[Node, str] = {}
    by_name = {n.name: n for n in m.graph.nodes}

    def record_use(def_node: Node, use_node: Optional[Node]):
        dp, up = part_of.get(def_node), (part_of.get(use_node) if use_node is not None else None)
        if dp == up:
            return
        if dp is not None:
            partitions[dp].outputs.setdefault(def_node.name)
            if up is not None:
                partitions[dp].dependents.setdefault(up)
        if up is not None:
            partitions[up].inputs.setdefault(def_node.name)
            if dp is not None:
                partitions[up].dependencies.setdefault(dp)

    for node in m.graph.nodes:
        if node.op == "output":
            map_arg(node.args[0], lambda n: record_use(n, None))
            continue
        if node.op in ("placeholder", "get_attr"):
            continue
        name = str(split_callback(node))
        part = partitions.get(name)
        if part is None:
            part = partitions[name] = Partition(name)
        part.node_names.append(node.name)
        part_of[node] = name
        for a in node.all_input_nodes:
            record_use(a, node)

    # partitions in dependency order (Kahn's algorithm; a cycle is an error)
    pending = {name: len(p.dependencies) for name, p in partitions.items()}
    ready = [name for name, c in pending.items() if c == 0]
    order: List[str] = []
    while ready:
        name = ready.pop(0)
        order.append(name)
        for dep in partitions[name].dependents:
            pending[dep] -= 1
            if pending[dep] == 0:
                ready.append(dep)
    if len(order) != len(partitions):
        raise RuntimeError("strata.fx.passes.split_module: the partitions depend on each other in a cycle: "
                           f"{sorted(set(partitions) - set(order))}")

    # each partition's graph
    for name in order:
        part = partitions[name]
        for inp in part.inputs:
            src = by_name[inp]
            ph = part.graph.placeholder(inp if keep_original_node_name else inp, type_expr=src.type)
            ph.meta = dict(src.meta)
            part.environment[src] = ph
    for node in m.graph.nodes:
        if node not in part_of:
            continue
        part = partitions[part_of[node]]

        def lookup(a, part=part):
            if a in part.environment:
                return part.environment[a]
            raise RuntimeError(f"strata.fx.passes.split_module: node {a.name!r} is not available in partition "
                               f"{part.name}")
        args = map_arg(node.args, lookup)
        kwargs = map_arg(node.kwargs, lookup)
        new = part.graph.create_node(node.op, node.target, args, kwargs,
                                     name=node.name if keep_original_node_name else None, type_expr=node.type)
        new.meta = dict(node.meta)
        part.environment[node] = new

    # the top-level graph
    base = Graph()
    env: Dict[Node, Node] = {}
    for node in m.graph.nodes:
        if node.op == "placeholder":
            default = node.args[0] if node.args else inspect.Signature.empty
            env[node] = base.placeholder(node.target, type_expr=node.type, default_value=default)
            env[node].meta = dict(node.meta)
        elif node.op == "get_attr":
            env[node] = base.get_attr(node.target)
    submodules: Dict[str, Any] = {}
    for name in order:
        part = partitions[name]
        outs = [part.environment[by_name[o]] for o in part.outputs]
        part.graph.output(outs[0] if len(outs) == 1 else tuple(outs))
        submodules[part.submod_name] = GraphModule(root_m, part.graph)
        call = base.call_module(part.submod_name, tuple(env[by_name[i]] for i in part.inputs))
        if len(outs) == 1:
            env[by_name[next(iter(part.outputs))]] = call
        else:
            for i, o in enumerate(part.outputs):
                env[by_name[o]] = base.call_function(operator.getitem, (call, i))
        if qualname_map is not None:
            for n in part.graph.nodes:
                if n.op == "call_module":
                    qualname_map[f"{part.submod_name}.{n.target}"] = n.target
    out = next(n for n in m.graph.nodes if n.op == "output")
    base.output(map_arg(out.args[0], lambda n: env[n]))
    base.eliminate_dead_code()  # get_attr nodes only the partitions read
    for node in base.nodes:
        if node.op == "get_attr":
            submodules[node.target] = _fetch(root_m, node.target)
    return GraphModule(submodules, base)


def _fetch(mod, target):
    for atom in target.split("."):
        mod = getattr(mod, atom)
    return mod
