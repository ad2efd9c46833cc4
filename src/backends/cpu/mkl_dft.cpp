// oneMKL's DFTI through dlopen (see mkl_dft.h). The configuration constants below are DFTI's public enum values
// (mkl_dfti.h), spelled out so that the build needs no MKL header. Committed descriptors are cached by their
// whole geometry: committing one plans the transform (tens of microseconds for small sizes), computing with it
// is the cheap part.
#include "backends/cpu/mkl_dft.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/cpu/parallel.h"
#include "core/error.h"

namespace strata::cpu::dft {

namespace {

using MklLong = long;  // MKL_LONG on LP64 Linux (both of MKL's interfaces)
using Handle = void*;  // DFTI_DESCRIPTOR_HANDLE

// enum DFTI_CONFIG_PARAM / DFTI_CONFIG_VALUE (mkl_dfti.h).
enum : int {
  kForwardScale = 4, kBackwardScale = 5, kNumberOfTransforms = 7, kConjugateEvenStorage = 10, kPlacement = 11,
  kThreadLimit = 27, kDestroyInput = 28, kFwdDistance = 58, kBwdDistance = 59, kFwdStrides = 60, kBwdStrides = 61,
  kComplex = 32, kReal = 33, kSingle = 35, kDouble = 36, kComplexComplex = 39, kNotInplace = 44, kAvoid = 52,
};
constexpr int kMklThreadingGnu = 3, kMklThreadingSequential = 1;  // mkl_service.h

struct Api {
  MklLong (*create)(Handle*, int, int, MklLong, ...) = nullptr;
  MklLong (*set_value)(Handle, int, ...) = nullptr;
  MklLong (*commit)(Handle) = nullptr;
  MklLong (*compute_forward)(Handle, void*, ...) = nullptr;
  MklLong (*compute_backward)(Handle, void*, ...) = nullptr;
  MklLong (*free_descriptor)(Handle*) = nullptr;
  char* (*error_message)(MklLong) = nullptr;
  std::string reason = "the FFT library has not been loaded";
  bool ok = false;

  Api() {
    std::string tried;
    void* h = nullptr;
    const char* env = std::getenv("STRATA_MKL_RT");
    std::vector<std::string> names;
    if (env && *env) names.push_back(env);
    for (const char* n : {"libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so"}) names.push_back(n);
    for (const auto& n : names) {
      if ((h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
      tried += (tried.empty() ? "" : ", ") + n;
    }
    if (!h) {
      reason = "strata.fft needs oneMKL's FFT library (libmkl_rt), which was not found (tried " + tried +
               "; STRATA_MKL_RT may name the file). Install it with: pip install mkl";
      return;
    }
    // MKL's threads come from the GNU OpenMP runtime Strata already uses (set before MKL's first real call).
    if (auto layer = reinterpret_cast<int (*)(int)>(dlsym(h, "MKL_Set_Threading_Layer")))
      if (layer(kMklThreadingGnu) < 0) layer(kMklThreadingSequential);
    auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(h, name)); };
    sym(create, "DftiCreateDescriptor"), sym(set_value, "DftiSetValue"), sym(commit, "DftiCommitDescriptor");
    sym(compute_forward, "DftiComputeForward"), sym(compute_backward, "DftiComputeBackward");
    sym(free_descriptor, "DftiFreeDescriptor"), sym(error_message, "DftiErrorMessage");
    if (!create || !set_value || !commit || !compute_forward || !compute_backward || !free_descriptor) {
      reason = "the libmkl_rt that was loaded does not export MKL's DFTI functions (DftiCreateDescriptor, ...)";
      return;
    }
    ok = true;
  }

  void check(MklLong status, const char* what) const {
    if (status == 0) return;
    STRATA_CHECK(false, "fft: MKL's ", what, " failed: ",
                 error_message ? error_message(status) : "", " (status ", status, ")");
  }
};

const Api& api() {
  static Api a;
  return a;
}

// A committed descriptor; `mutex` serialises computes with it.
struct Plan {
  Handle handle = nullptr;
  std::mutex mutex;
  ~Plan() {
    if (handle) api().free_descriptor(&handle);
  }
};

std::vector<int64_t> key_of(const Geometry& g, int threads) {
  std::vector<int64_t> k = {int64_t(g.kind), g.dbl, g.forward, g.howmany, g.in_dist, g.out_dist, threads,
                            int64_t(g.lengths.size())};
  int64_t bits;
  static_assert(sizeof(bits) == sizeof(g.scale));
  std::memcpy(&bits, &g.scale, sizeof(bits));
  k.push_back(bits);
  for (auto* v : {&g.lengths, &g.in_strides, &g.out_strides}) k.insert(k.end(), v->begin(), v->end());
  return k;
}

std::shared_ptr<Plan> make_plan(const Geometry& g, int threads) {
  const Api& a = api();
  auto plan = std::make_shared<Plan>();
  const size_t rank = g.lengths.size();
  std::vector<MklLong> lengths(g.lengths.begin(), g.lengths.end());
  const int precision = g.dbl ? kDouble : kSingle, domain = g.kind == Kind::C2C ? kComplex : kReal;
  if (rank == 1) a.check(a.create(&plan->handle, precision, domain, MklLong(1), lengths[0]), "DftiCreateDescriptor");
  else a.check(a.create(&plan->handle, precision, domain, MklLong(rank), lengths.data()), "DftiCreateDescriptor");
  Handle h = plan->handle;
  // DFTI's strides: an offset, then one stride per dim. The forward domain is the input of a forward transform
  // (the real side of R2C/C2R), the backward domain its output.
  const bool in_is_fwd = g.kind == Kind::R2C || (g.kind == Kind::C2C && g.forward);
  std::vector<MklLong> in_s{0}, out_s{0};
  in_s.insert(in_s.end(), g.in_strides.begin(), g.in_strides.end());
  out_s.insert(out_s.end(), g.out_strides.begin(), g.out_strides.end());
  const std::vector<MklLong>& fwd_s = in_is_fwd ? in_s : out_s;
  const std::vector<MklLong>& bwd_s = in_is_fwd ? out_s : in_s;
  a.check(a.set_value(h, kPlacement, kNotInplace), "DftiSetValue(DFTI_PLACEMENT)");
  if (g.kind != Kind::C2C) a.check(a.set_value(h, kConjugateEvenStorage, kComplexComplex), "DftiSetValue(CCE)");
  a.check(a.set_value(h, kFwdStrides, fwd_s.data()), "DftiSetValue(DFTI_FWD_STRIDES)");
  a.check(a.set_value(h, kBwdStrides, bwd_s.data()), "DftiSetValue(DFTI_BWD_STRIDES)");
  if (g.howmany > 1) {
    a.check(a.set_value(h, kNumberOfTransforms, MklLong(g.howmany)), "DftiSetValue(DFTI_NUMBER_OF_TRANSFORMS)");
    a.check(a.set_value(h, kFwdDistance, MklLong(in_is_fwd ? g.in_dist : g.out_dist)), "DftiSetValue(FWD_DISTANCE)");
    a.check(a.set_value(h, kBwdDistance, MklLong(in_is_fwd ? g.out_dist : g.in_dist)), "DftiSetValue(BWD_DISTANCE)");
  }
  a.set_value(h, kDestroyInput, kAvoid);  // the default; older libraries lack the parameter
  if (g.dbl) {
    a.check(a.set_value(h, kForwardScale, g.scale), "DftiSetValue(DFTI_FORWARD_SCALE)");
    a.check(a.set_value(h, kBackwardScale, g.scale), "DftiSetValue(DFTI_BACKWARD_SCALE)");
  } else {
    a.check(a.set_value(h, kForwardScale, float(g.scale)), "DftiSetValue(DFTI_FORWARD_SCALE)");
    a.check(a.set_value(h, kBackwardScale, float(g.scale)), "DftiSetValue(DFTI_BACKWARD_SCALE)");
  }
  a.check(a.set_value(h, kThreadLimit, MklLong(threads)), "DftiSetValue(DFTI_THREAD_LIMIT)");
  a.check(a.commit(h), "DftiCommitDescriptor");
  return plan;
}

std::shared_ptr<Plan> plan_for(const Geometry& g) {
  // Small batches run on one thread: waking a team costs more than the transform (and far more when the
  // machine is oversubscribed).
  double points = double(g.howmany);
  for (int64_t n : g.lengths) points *= double(n);
  const int threads = points < 32768 ? 1 : std::max(1, get_num_threads());
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::shared_ptr<Plan>> cache;
  auto key = key_of(g, threads);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto plan = make_plan(g, threads);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 64) cache.clear();  // plans in use stay alive through their shared_ptr
  return cache.emplace(std::move(key), plan).first->second;
}

}  // namespace

bool available() { return api().ok; }
const char* unavailable_reason() { return api().reason.c_str(); }

void execute(const Geometry& g, const void* in, void* out) {
  const Api& a = api();
  STRATA_CHECK(a.ok, a.reason);
  auto plan = plan_for(g);
  std::lock_guard<std::mutex> lock(plan->mutex);
  // DFTI takes non-const input pointers; out-of-place transforms leave the input as it was (DFTI_DESTROY_INPUT
  // is DFTI_AVOID).
  void* src = const_cast<void*>(in);
  const bool fwd = g.kind == Kind::R2C || (g.kind == Kind::C2C && g.forward);
  a.check(fwd ? a.compute_forward(plan->handle, src, out) : a.compute_backward(plan->handle, src, out),
          fwd ? "DftiComputeForward" : "DftiComputeBackward");
}

}  // namespace strata::cpu::dft
