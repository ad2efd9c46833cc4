class Size(tuple):
    """The shape of a tensor: a tuple of ints, like torch.Size."""

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return "strata.Size([" + ", ".join(str(s) for s in self) + "])"

    def __getitem__(self, item):
        r = super().__getitem__(item)
        return Size(r) if isinstance(item, slice) else r
