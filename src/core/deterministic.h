// Deterministic algorithms (torch.use_deterministic_algorithms): a process-wide
// switch that ops with a result depending on thread scheduling read. Such an
// op either takes a deterministic path while it is on (index_put_ without
// accumulation writes duplicates in index order, on one thread) or calls
// alert_not_deterministic, which raises torch's error naming the op (or, in
// warn-only mode, warns through the handler the Python binding installs).
#pragma once

#include <string>

namespace strata {

bool deterministic_algorithms();
bool deterministic_warn_only();
void set_deterministic_algorithms(bool on, bool warn_only);

using DeterminismWarnFn = void (*)(const std::string& message);
void set_determinism_warn_handler(DeterminismWarnFn fn);

// Raises (or warns) when deterministic algorithms are on: `op` has no
// deterministic implementation.
void alert_not_deterministic(const char* op);

}  // namespace strata
