"""Settings of strata.compile (strata._dynamo.config, as torch._dynamo.config)."""

# Compiled versions kept per frame; past this the frame runs eagerly (with one warning naming the guard
# that failed).
cache_size_limit = 8
# Also torch's name for it.
recompile_limit = 8
# A graph break inside a loop over known items (a range, a list, a tuple, a module list) resumes in the
# loop when at most this many items are left: each later iteration that breaks again is one more graph
# (and resume function); a longer rest of the loop runs in Python after the break.
max_resumed_loop_items = 64
# .item() / .tolist() inside a compiled region: a graph break (False) or, once supported, a graph output.
capture_scalar_outputs = False
# Errors inside capture fall back to eager with a warning instead of raising.
suppress_errors = False
# Unused by Strata; kept so torch scripts that set them run unchanged.
verbose = False
automatic_dynamic_shapes = True
assume_static_by_default = True
# Captured graphs are functionalized before AOT autograd and the code generator (Note
# [Functionalization] in functionalize.py): in-place ops, out= writes and writes into views become
# functional ops, written inputs get one copy_ at the end. False: graphs run as captured (the
# behaviour before the pass, kept for comparison).
functionalize = True
# After functionalization the strata_cpp backend writes results into buffers whose old value is dead
# (Note [Reinplacing] in _inductor/reinplace.py): out= for ops outside kernels, kernel outputs into their
# dying inputs, scatters into their base. False: every result is a new tensor (for comparison).
reinplace = True
