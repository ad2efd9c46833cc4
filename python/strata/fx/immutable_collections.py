"""strata.fx.immutable_collections: the list and dict types whose mutation raises, as torch.fx uses for
``node.kwargs`` (mutating it in place would leave ``users`` stale; assign a new dict instead)."""

__all__ = ["immutable_list", "immutable_dict"]


def _no_mutation(self, *args, **kwargs):
    raise NotImplementedError(f"'{type(self).__name__}' object does not support mutation. If you are trying to "
                              "modify the kwargs of an fx.Node object, instead create a new copy of it and assign "
                              "the copy to the node: new_kwargs = dict(node.kwargs); new_kwargs[k] = v; "
                              "node.kwargs = new_kwargs")


class immutable_list(list):
    for _m in ("__delitem__", "__iadd__", "__imul__", "__setitem__", "append", "clear", "extend", "insert", "pop",
               "remove", "reverse", "sort"):
        locals()[_m] = _no_mutation
    del _m

    def __hash__(self):
        return hash(tuple(self))

    def __reduce__(self):
        return (immutable_list, (tuple(self),))


class immutable_dict(dict):
    for _m in ("__delitem__", "__setitem__", "clear", "pop", "popitem", "setdefault", "update", "__ior__"):
        locals()[_m] = _no_mutation
    del _m

    def __hash__(self):
        return hash(tuple(self.items()))

    def __reduce__(self):
        return (immutable_dict, (tuple(self.items()),))
