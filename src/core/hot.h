// Note [Hot path layout]
// STRATA_HOT marks the functions every small op runs through (binding ->
// dispatcher -> TensorIterator -> allocator -> kernel). GCC puts them in
// .text.hot, which the linker groups together: the per-op path then spans a
// few dozen KiB instead of being spread across the ~20 MiB library, where an
// unrelated change elsewhere moved `a + b` by 10% (same instruction count,
// different code placement: docs/BINDING.md, step 21).
#pragma once

#define STRATA_HOT __attribute__((hot))
