"""strata.compiler: queries a model may make about compilation. Nothing runs
under a graph compiler while these are asked from eager code, so both are False."""

__all__ = ["is_compiling", "is_dynamo_compiling"]


def is_compiling():
    return False


def is_dynamo_compiling():
    return False
