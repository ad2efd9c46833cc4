"""The fusing code generator, first slice: pointwise groups of a captured graph become
one generated C++ loop each, compiled by the system g++ and loaded with dlopen.

Pieces (Note [The loop IR and its renderer] in ir.py):
  ir.py        the loop IR and the lowering of graph nodes to it (per-op table)
  cpp.py       the C++ renderer of the loop IR
  codecache.py finding the compiler, flags, the in-memory and on-disk kernel caches
  fusion.py    grouping a graph's nodes and the runner that calls kernels and falls back to ops
  cuda.py      the CUDA C renderer of the same IR; cuda_compile.py compiles it with NVRTC (docs/CUDA.md)

backend="strata_cpp" (python/strata/_dynamo/backends.py) is fusion.compile_graph."""
