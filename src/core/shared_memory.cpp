#include "core/shared_memory.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/error.h"

namespace strata {
namespace {

// What the deleter of a shared mapping owns.
struct SharedBlock {
  int fd = -1;
  void* ptr = nullptr;
  size_t len = 0;
};

// The live shared mappings by address: whether a storage is shared, and its memfd.
std::mutex g_mutex;
std::unordered_map<const void*, SharedBlock*>& blocks() {
  static auto* m = new std::unordered_map<const void*, SharedBlock*>();
  return *m;
}

void release_shared(void* ctx) {
  auto* b = static_cast<SharedBlock*>(ctx);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    blocks().erase(b->ptr);
  }
  munmap(b->ptr, b->len);
  close(b->fd);
  delete b;
}

// Maps nbytes (at least one byte, so that empty storages are shared too) of fd, which the result owns.
DataPtr map_shared(int fd, size_t nbytes, const char* what) {
  const size_t len = nbytes > 0 ? nbytes : 1;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    throw Error(str(what, ": mmap of ", len, " bytes of shared memory failed: ", std::strerror(err)));
  }
  auto* b = new SharedBlock{fd, p, len};
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    blocks()[p] = b;
  }
  return DataPtr(p, b, &release_shared);
}

SharedBlock* find_block(const StorageImpl& s) {
  const void* p = s.data();
  if (!p) return nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = blocks().find(p);
  return it == blocks().end() ? nullptr : it->second;
}

}  // namespace

bool storage_is_shared(const StorageImpl& s) { return find_block(s) != nullptr; }

int shared_storage_fd(const StorageImpl& s) {
  SharedBlock* b = find_block(s);
  return b ? b->fd : -1;
}

void share_storage(StorageImpl& s) {
  if (!s.device().is_cpu() || storage_is_shared(s)) return;
  static std::atomic<int> counter{0};
  const std::string name = str("strata_shm_", getpid(), "_", counter.fetch_add(1));
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) throw Error(str("share_memory_: memfd_create failed: ", std::strerror(errno)));
  const size_t len = s.nbytes() > 0 ? s.nbytes() : 1;
  if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
    const int err = errno;
    close(fd);
    throw Error(str("share_memory_: cannot size ", len, " bytes of shared memory: ", std::strerror(err)));
  }
  DataPtr d = map_shared(fd, s.nbytes(), "share_memory_");
  if (s.nbytes() > 0 && s.data()) std::memcpy(d.get(), s.data(), s.nbytes());
  s.swap_data(d);  // every view of s reads its data through the storage; d now holds the old memory
}

intrusive_ptr<StorageImpl> storage_from_shared_fd(int fd, size_t nbytes) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < nbytes) {
    close(fd);
    throw Error(str("shared memory: the received descriptor holds fewer than the ", nbytes, " bytes expected"));
  }
  return make_intrusive<StorageImpl>(map_shared(fd, nbytes, "shared memory"), nbytes, Device());
}

}  // namespace strata
