"""strata.compile's frame capture: the symbolic bytecode interpreter, guards and graph breaks."""
