"""strata.fx.subgraph_rewriter: replace_pattern(gm, pattern, replacement).

The pattern and the replacement are callables (functions or modules, traced with symbolic_trace) or
Graphs with the same placeholders. A match is a set of nodes of gm.graph with the pattern's ops,
targets and argument structure, where each pattern placeholder stands for one node of gm (the same
node wherever that placeholder is used), literals are equal, and no node inside the match (other
than the pattern's outputs) is read from outside it. Matches do not overlap; each is replaced by a
copy of the replacement graph, fed by the nodes the placeholders matched."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Union

from .graph import Graph, _fetch_attr
from .graph_module import GraphModule
from .node import Node

__all__ = ["Match", "ReplacedPatterns", "replace_pattern", "replace_pattern_with_filters"]


class Match(NamedTuple):
    anchor: Node  # the node of gm that matched the pattern's (first) output
    nodes_map: Dict[Node, Node]  # pattern node -> gm node


class ReplacedPatterns(NamedTuple):
    anchor: Node
    nodes_map: Dict[Node, Node]
    replacements: List[Node]


def _as_graph(fn_or_graph) -> (Graph, Any):
    if isinstance(fn_or_graph, Graph):
        return fn_or_graph, None
    if isinstance(fn_or_graph, GraphModule):
        return fn_or_graph.graph, fn_or_graph
    from ._symbolic_trace import symbolic_trace
    gm = symbolic_trace(fn_or_graph)
    return gm.graph, gm


def _outputs(g: Graph) -> List[Node]:
    out = [n for n in g.nodes if n.op == "output"]
    if len(out) != 1:
        raise RuntimeError("strata.fx.replace_pattern: a pattern graph must have exactly one output node")
    rv = out[0].args[0]
    items = list(rv) if isinstance(rv, (tuple, list)) else [rv]
    if not all(isinstance(x, Node) for x in items):
        raise RuntimeError("strata.fx.replace_pattern: the pattern must return nodes (not constants)")
    return items


class _Matcher:
    def __init__(self, pattern: Graph, ignore_literals: bool = False):
        self.pattern = pattern
        self.ignore_literals = ignore_literals
        self.outputs = _outputs(pattern)
        self.placeholders = [n for n in pattern.nodes if n.op == "placeholder"]

    def _match_arg(self, pa, ga, m: Dict[Node, Node]) -> bool:
        if isinstance(pa, Node):
            if not isinstance(ga, Node):
                return False
            return self._match_node(pa, ga, m)
        if isinstance(ga, Node):
            return False
        if isinstance(pa, (tuple, list)):
            return (isinstance(ga, (tuple, list)) and len(pa) == len(ga)
                    and all(self._match_arg(a, b, m) for a, b in zip(pa, ga)))
        if isinstance(pa, dict):
            return (isinstance(ga, dict) and pa.keys() == ga.keys()
                    and all(self._match_arg(pa[k], ga[k], m) for k in pa))
        if self.ignore_literals:
            return True
        return type(pa) is type(ga) and pa == ga

    def _match_node(self, pn: Node, gn: Node, m: Dict[Node, Node]) -> bool:
        if pn in m:
            return m[pn] is gn
        if pn.op == "placeholder":
            m[pn] = gn
            return True
        if pn.op != gn.op or gn.op in ("placeholder", "output"):
            return False
        if pn.target != gn.target and not (callable(pn.target) and pn.target is gn.target):
            return False
        if len(pn.args) != len(gn.args) or pn.kwargs.keys() != gn.kwargs.keys():
            return False
        if gn in m.values():
            return False
        m[pn] = gn
        return (all(self._match_arg(a, b, m) for a, b in zip(pn.args, gn.args))
                and all(self._match_arg(pn.kwargs[k], gn.kwargs[k], m) for k in pn.kwargs))

    def _contained(self, m: Dict[Node, Node]) -> bool:
        """No node inside the match except the outputs is read from outside it."""
        inside = {g for p, g in m.items() if p.op != "placeholder"}
        outs = {m[o] for o in self.outputs}
        for g in inside:
            if g in outs:
                continue
            if any(u not in inside for u in g.users):
                return False
        return True

    def matches(self, graph: Graph, taken: set) -> List[Dict[Node, Node]]:
        found = []
        nodes = list(graph.nodes)
        first, rest = self.outputs[0], self.outputs[1:]

        def extend(m, i):
            if i == len(rest):
                return m if self._contained(m) else None
            for cand in nodes:
                if cand in taken:
                    continue
                m2 = dict(m)
                if self._match_node(rest[i], cand, m2):
                    r = extend(m2, i + 1)
                    if r is not None:
                        return r
            return None

        for cand in nodes:
            if cand in taken:
                continue
            m: Dict[Node, Node] = {}
            if not self._match_node(first, cand, m):
                continue
            m = extend(m, 0)
            if m is None:
                continue
            if any(g in taken for p, g in m.items() if p.op != "placeholder"):
                continue
            taken.update(g for p, g in m.items() if p.op != "placeholder")
            found.append(m)
        return found


def replace_pattern_with_filters(gm: GraphModule, pattern, replacement, match_filters=None,
                                 ignore_literals: bool = False) -> List[ReplacedPatterns]:
    """replace_pattern, keeping only the matches for which every match_filter(match, gm.graph, pattern_graph)
    is true; the result also lists the replacement nodes."""
    pattern_graph, _ = _as_graph(pattern)
    replacement_graph, replacement_gm = _as_graph(replacement)
    p_ph = [n for n in pattern_graph.nodes if n.op == "placeholder"]
    r_ph = [n for n in replacement_graph.nodes if n.op == "placeholder"]
    if len(p_ph) != len(r_ph):
        raise ValueError(f"strata.fx.replace_pattern: the pattern takes {len(p_ph)} inputs but the replacement "
                         f"takes {len(r_ph)}")
    matcher = _Matcher(pattern_graph, ignore_literals)
    graph = gm.graph
    changed: Dict[Node, Node] = {}  # nodes replaced by earlier matches -> what replaced them

    def current(n):
        while n in changed:
            n = changed[n]
        return n
    results: List[ReplacedPatterns] = []
    for m in matcher.matches(graph, set()):
        match = Match(anchor=m[matcher.outputs[0]], nodes_map=m)
        if match_filters and not all(f(match, graph, pattern_graph) for f in match_filters):
            continue
        if any(p not in m for p in p_ph):
            continue  # a pattern input nothing reads
        inputs = [current(m[p]) for p in p_ph]
        outs = [m[o] for o in matcher.outputs]
        order = {n: i for i, n in enumerate(graph.nodes)}
        first_out = min(outs, key=lambda n: order[n])
        if any(order[i] >= order[first_out] for i in inputs):
            continue  # the replacement could not be placed before every output's users
        # submodules/attributes the replacement reads, copied into gm
        if replacement_gm is not None:
            for n in replacement_graph.nodes:
                if n.op in ("call_module", "get_attr"):
                    try:
                        _fetch_attr(gm, n.target)
                    except AttributeError:
                        obj = _fetch_attr(replacement_gm, n.target)
                        from ..nn.modules.module import Module
                        if isinstance(obj, Module):
                            gm.add_submodule(n.target, obj)
                        else:
                            from .graph_module import _assign_attr
                            _assign_attr(obj, gm, n.target)
        with graph.inserting_before(first_out):
            val_map = dict(zip(r_ph, inputs))
            before = set(graph.nodes)
            rv = graph.graph_copy(replacement_graph, val_map)
        new_nodes = [n for n in graph.nodes if n not in before]
        rv_list = list(rv) if isinstance(rv, (tuple, list)) else [rv]
        if len(rv_list) != len(outs):
            raise ValueError(f"strata.fx.replace_pattern: the pattern returns {len(outs)} values but the "
                             f"replacement returns {len(rv_list)}")
        for old, new in zip(outs, rv_list):
            if isinstance(new, Node):
                old.replace_all_uses_with(new)
                changed[old] = new
            elif old.users:
                raise RuntimeError("strata.fx.replace_pattern: the replacement returns a constant where the "
                                   "pattern returns a node that is used")
        for p in reversed(list(pattern_graph.nodes)):
            if p.op in ("placeholder", "output") or p not in m:
                continue
            g = m[p]
            if not g.users and not g._erased:
                graph.erase_node(g)
        results.append(ReplacedPatterns(match.anchor, m, new_nodes))
    gm.recompile()
    return results


def replace_pattern(gm: GraphModule, pattern: Union[Callable, Graph],
                    replacement: Union[Callable, Graph]) -> List[Match]:
    """Replaces every (non-overlapping) match of ``pattern`` in ``gm.graph`` by ``replacement``; recompiles
    gm and returns the matches."""
    replaced = replace_pattern_with_filters(gm, pattern, replacement)
    return [Match(anchor=r.anchor, nodes_map=r.nodes_map) for r in replaced]
