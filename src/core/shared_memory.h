// CPU storage in shared memory (Tensor.share_memory_, strata.multiprocessing).
//
// share_storage moves a storage's bytes into an anonymous shared mapping (a memfd, MAP_SHARED) and swaps the
// storage's data pointer to it, so every view of the storage sees the move. The storage keeps the memfd open; a
// process that receives the descriptor (multiprocessing passes it over a Unix socket) maps the same pages with
// storage_from_shared_fd, so writes on either side are seen by the other. The common allocation path is untouched:
// whether a storage is shared is looked up in a registry of the live shared mappings (only share_memory_ and
// is_shared consult it).
#pragma once

#include <cstddef>

#include "core/tensor.h"

namespace strata {

// Moves the storage into shared memory in place (a no-op when it already is; CPU storage only).
void share_storage(StorageImpl& s);
bool storage_is_shared(const StorageImpl& s);
// The memfd of a shared storage (owned by the storage; -1 when it is not shared).
int shared_storage_fd(const StorageImpl& s);
// A CPU storage of nbytes mapping the shared memory behind fd; the storage takes ownership of fd.
intrusive_ptr<StorageImpl> storage_from_shared_fd(int fd, size_t nbytes);

}  // namespace strata
