"""strata.fx.experimental.optimization: ``fuse`` folds eval-mode BatchNorm into the Conv/Linear before it;
``remove_dropout`` drops Dropout modules. Both work on a traced copy and return a GraphModule."""

from __future__ import annotations

import copy
from typing import Dict

from ... import nn
from ...nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval
from .._symbolic_trace import symbolic_trace
from ..graph_module import GraphModule
from ..node import Node

__all__ = ["fuse", "remove_dropout", "matches_module_pattern", "replace_node_module"]

_FUSABLE = [(nn.Conv1d, nn.BatchNorm1d), (nn.Conv2d, nn.BatchNorm2d), (nn.Conv3d, nn.BatchNorm3d),
            (nn.Linear, nn.BatchNorm1d)]


def matches_module_pattern(pattern, node: Node, modules: Dict[str, nn.Module]) -> bool:
    """Whether ``node`` calls a module of type pattern[-1] whose input is a call of pattern[-2], and so on."""
    if not node.args:
        return False
    nodes = (node.args[0], node)
    for expected, n in zip(pattern, nodes):
        if not isinstance(n, Node) or n.op != "call_module" or not isinstance(n.target, str):
            return False
        if n.target not in modules or type(modules[n.target]) is not expected:
            return False
    return True


def replace_node_module(node: Node, modules: Dict[str, nn.Module], new_module: nn.Module) -> None:
    """Installs ``new_module`` at the path ``node.target`` (and in ``modules``)."""
    parent, _, name = node.target.rpartition(".")
    owner = modules[parent] if parent else modules[""]
    modules[node.target] = new_module
    setattr(owner, name, new_module)


def fuse(model: nn.Module, inplace: bool = False, no_trace: bool = False) -> GraphModule:
    """Folds each BatchNorm that only reads a Conv1d/2d/3d or Linear (and is its only reader) into it.
    The model must be in eval mode (the running statistics are what is folded)."""
    if not inplace:
        model = copy.deepcopy(model)
    fx_model = model if (no_trace and isinstance(model, GraphModule)) else symbolic_trace(model)
    modules = dict(fx_model.named_modules())
    new_graph = copy.deepcopy(fx_model.graph)
    for pattern in _FUSABLE:
        for node in list(new_graph.nodes):
            if not matches_module_pattern(pattern, node, modules):
                continue
            first = node.args[0]
            if len(first.users) > 1:
                continue
            layer, bn = modules[first.target], modules[node.target]
            if not bn.track_running_stats:
                continue
            if layer.training or bn.training:
                raise AssertionError("strata.fx.experimental.optimization.fuse: fusion is only for eval mode "
                                     f"({first.target} / {node.target} are training); call model.eval() first")
            fused = fuse_linear_bn_eval(layer, bn) if pattern[0] is nn.Linear else fuse_conv_bn_eval(layer, bn)
            replace_node_module(first, modules, fused)
            node.replace_all_uses_with(first)
            new_graph.erase_node(node)
    return GraphModule(fx_model, new_graph)


def remove_dropout(model: nn.Module) -> GraphModule:
    """The model traced with its Dropout modules' nodes removed (their inputs read instead)."""
    fx_model = symbolic_trace(model)
    modules = dict(fx_model.named_modules())
    g = fx_model.graph
    for node in list(g.nodes):
        if node.op == "call_module" and isinstance(modules.get(node.target), nn.Dropout):
            node.replace_all_uses_with(node.args[0])
            g.erase_node(node)
    g.lint()
    fx_model.recompile()
    return fx_model
