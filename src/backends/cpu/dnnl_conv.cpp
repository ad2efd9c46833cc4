// Note [oneDNN convolution]
// Why: the small-CNN forward of bench/suite.py (32x3x32x32 -> conv 3->16 -> relu -> conv 16->32 -> relu) took 1.6-1.9x
// torch's time through im2col + sgemm: the GEMM alone (oneDNN's dnnl_sgemm, ~80% of peak) was as slow as torch's
// whole forward, and the im2col copies (rows of 32 floats) plus the output copy added ~35%. Torch runs oneDNN's direct
// convolution. Measured here (one thread, oneDNN 2.6.3, Zen 4), 32x16x32x32 -> 32 channels, 3x3, pad 1:
//   im2col + dnnl_sgemm (our path)                    5.0 ms
//   oneDNN, plain nchw/oihw formats (x64:gemm:jit)     5.2 ms  (it is im2col + GEMM as well)
//   oneDNN, "any" formats (brgconv), forward_inference 3.5 ms  (reorders to nChw16c and back included)
//   oneDNN, "any" formats (jit:avx512_core), forward_training 3.0 ms  <- used (torch picks the same)
//   torch.nn.functional.conv2d                         3.0-3.2 ms
// and 0.47 ms against our 0.53 ms for the 3->16 layer. So float32 convolutions go to oneDNN's primitive with
// formats of its choice; the primitives are cached per shape. Tiny convolutions stay on our path (preferred()).
//
// oneDNN's primitive API is loaded at first use (dnnl_runtime.h): a missing library only means our own path.
// A start-up check compares a small grouped, strided, dilated convolution with a direct loop before trusting it.
// STRATA_DNNL_CONV=0 turns it off.
#include "backends/cpu/dnnl_conv.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/cpu/dnnl_runtime.h"
#include "core/tensor.h"

namespace strata::cpu::dnnl_conv {

#ifndef STRATA_HAVE_DNNL_PRIMITIVES

bool forward_f32(const Conv2dShape&, const float*, const float*, const float*, float*) { return false; }
bool preferred(const Conv2dShape&) { return false; }

#else

namespace {

using dnnl_runtime::Api;

using Key = std::array<int64_t, 17>;

// One shape's primitives. User memories are re-pointed at the caller's buffers on each call; the blocked copies
// live in tensors of Strata's caching allocator for the duration of a call.
struct Entry {
  dnnl_primitive_t conv = nullptr, rx = nullptr, rw = nullptr, ry = nullptr;
  dnnl_memory_t ux = nullptr, uw = nullptr, ub = nullptr, uy = nullptr, bx = nullptr, bw = nullptr, by = nullptr;
  dnnl_memory_t us = nullptr;     // the convolution's scratchpad (user mode), if it needs one
  size_t sx = 0, sw = 0, sy = 0;  // bytes of the blocked copies (0: the user layout is used directly)
  size_t ss = 0;                  // bytes of the scratchpad
  const Api* api = nullptr;
  ~Entry() {
    for (dnnl_primitive_t p : {conv, rx, rw, ry})
      if (p) api->dnnl_primitive_destroy(p);
    for (dnnl_memory_t m : {ux, uw, ub, uy, bx, bw, by, us})
      if (m) api->dnnl_memory_destroy(m);
  }
};

std::map<Key, std::unique_ptr<Entry>>& cache() {
  static auto* c = new std::map<Key, std::unique_ptr<Entry>>();  // outlives static destructors
  return *c;
}

bool run_locked(const Api& a, const Conv2dShape& s, const float* x, const float* w, const float* b, float* y);
bool self_check(const Api& a);

// Direct loop, for the start-up check.
void reference(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y) {
  const int64_t cg = s.c / s.groups, og = s.o / s.groups;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.o; ++o)
      for (int64_t i = 0; i < s.oh; ++i)
        for (int64_t j = 0; j < s.ow; ++j) {
          double acc = b ? b[o] : 0.0;
          const int64_t g = o / og;
          for (int64_t k = 0; k < cg; ++k)
            for (int64_t u = 0; u < s.kh; ++u)
              for (int64_t v = 0; v < s.kw; ++v) {
                const int64_t ih = i * s.sh - s.ph + u * s.dh, iw = j * s.sw - s.pw + v * s.dw;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                acc += double(x[((n * s.c + g * cg + k) * s.h + ih) * s.w + iw]) *
                       double(w[((o * cg + k) * s.kh + u) * s.kw + v]);
              }
          y[((n * s.o + o) * s.oh + i) * s.ow + j] = static_cast<float>(acc);
        }
}

bool self_check(const Api& a) {
  // Two groups of 16 channels (blocked layouts), stride 2, dilation 2, pad 1, odd sizes.
  Conv2dShape s{2, 32, 9, 11, 32, 3, 3, 0, 0, 2, 2, 1, 1, 2, 2, 2};
  s.oh = (s.h + 2 * s.ph - s.dh * (s.kh - 1) - 1) / s.sh + 1;
  s.ow = (s.w + 2 * s.pw - s.dw * (s.kw - 1) - 1) / s.sw + 1;
  std::vector<float> x(s.n * s.c * s.h * s.w), w(s.o * (s.c / s.groups) * s.kh * s.kw), b(s.o);
  uint32_t r = 12345;
  auto rnd = [&] { return (r = r * 1664525u + 1013904223u, float(int(r >> 9) % 2001 - 1000) / 1000.0f); };
  for (float& v : x) v = rnd();
  for (float& v : w) v = rnd();
  for (float& v : b) v = rnd();
  std::vector<float> got(s.n * s.o * s.oh * s.ow, NAN), want(got.size());
  reference(s, x.data(), w.data(), b.data(), want.data());
  {
    std::lock_guard<std::mutex> g(dnnl_runtime::mutex());
    if (!run_locked(a, s, x.data(), w.data(), b.data(), got.data())) return false;
  }
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-4f * (1.0f + std::fabs(want[i])))) return false;
  return true;
}

// Builds the primitives of one shape into e; false (e partly filled) when oneDNN cannot run it.
bool build(const Api& a, const Conv2dShape& s, bool has_bias, Entry* e) {
  const int64_t g = s.groups;
  dnnl_memory_desc_t ux, uw, ub, uy, ax, aw, ay;
  dnnl_dims_t xd = {s.n, s.c, s.h, s.w}, yd = {s.n, s.o, s.oh, s.ow}, bd = {s.o};
  dnnl_dims_t wd = {g, s.o / g, s.c / g, s.kh, s.kw}, wd1 = {s.o, s.c, s.kh, s.kw};
  const int wn = g > 1 ? 5 : 4;
  const dnnl_format_tag_t wtag = g > 1 ? dnnl_goihw : dnnl_oihw;
  if (a.dnnl_memory_desc_init_by_tag(&ux, 4, xd, dnnl_f32, dnnl_nchw) != dnnl_success ||
      a.dnnl_memory_desc_init_by_tag(&uy, 4, yd, dnnl_f32, dnnl_nchw) != dnnl_success ||
      a.dnnl_memory_desc_init_by_tag(&uw, wn, g > 1 ? wd : wd1, dnnl_f32, wtag) != dnnl_success ||
      a.dnnl_memory_desc_init_by_tag(&ub, 1, bd, dnnl_f32, dnnl_x) != dnnl_success ||
      a.dnnl_memory_desc_init_by_tag(&ax, 4, xd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      a.dnnl_memory_desc_init_by_tag(&ay, 4, yd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      a.dnnl_memory_desc_init_by_tag(&aw, wn, g > 1 ? wd : wd1, dnnl_f32, dnnl_format_tag_any) != dnnl_success)
    return false;
  // oneDNN wants the bottom/right padding that makes its output size formula exact (torch floors instead).
  dnnl_dims_t strides = {s.sh, s.sw}, dil = {s.dh - 1, s.dw - 1}, pl = {s.ph, s.pw};
  dnnl_dims_t pr = {(s.oh - 1) * s.sh + (s.kh - 1) * s.dh + 1 - s.h - s.ph,
                    (s.ow - 1) * s.sw + (s.kw - 1) * s.dw + 1 - s.w - s.pw};
  dnnl_convolution_desc_t cd;
  // forward_training: oneDNN 2.6 then picks jit:avx512_core, 15% faster than forward_inference's brgconv here.
  if (a.dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &ax, &aw,
                                                   has_bias ? &ub : nullptr, &ay, strides, dil, pl,
                                                   pr) != dnnl_success)
    return false;
  // The scratchpad comes from Strata's caching allocator for the length of a call (user mode), so its memory
  // serves other tensors between calls; the library's own mode keeps a buffer of the largest size ever needed.
  // (On the digits CNN the scratchpads are small: peak RSS did not move measurably.)
  dnnl_primitive_attr_t attr = nullptr;
  if (a.dnnl_primitive_attr_create(&attr) != dnnl_success) return false;
  std::unique_ptr<dnnl_primitive_attr, decltype(a.dnnl_primitive_attr_destroy)> attr_guard(
      attr, a.dnnl_primitive_attr_destroy);
  if (a.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success) return false;
  dnnl_primitive_desc_t pd = nullptr;
  if (a.dnnl_primitive_desc_create(&pd, &cd, attr, a.engine, nullptr) != dnnl_success) return false;
  std::unique_ptr<dnnl_primitive_desc, decltype(a.dnnl_primitive_desc_destroy)> pd_guard(
      pd, a.dnnl_primitive_desc_destroy);
  const dnnl_memory_desc_t* mx = a.dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  const dnnl_memory_desc_t* mw = a.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t* my = a.dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  if (!mx || !mw || !my || a.dnnl_primitive_create(&e->conv, pd) != dnnl_success) return false;
  auto reorder = [&](const dnnl_memory_desc_t* from, const dnnl_memory_desc_t* to, dnnl_primitive_t* out) {
    dnnl_primitive_desc_t rpd = nullptr;
    if (a.dnnl_reorder_primitive_desc_create(&rpd, from, a.engine, to, a.engine, nullptr) != dnnl_success)
      return false;
    bool ok = a.dnnl_primitive_create(out, rpd) == dnnl_success;
    a.dnnl_primitive_desc_destroy(rpd);
    return ok;
  };
  auto mem = [&](const dnnl_memory_desc_t* md, dnnl_memory_t* out) {
    return a.dnnl_memory_create(out, md, a.engine, DNNL_MEMORY_NONE) == dnnl_success;
  };
  if (!mem(&ux, &e->ux) || !mem(&uw, &e->uw) || !mem(&ub, &e->ub) || !mem(&uy, &e->uy)) return false;
  const dnnl_memory_desc_t* ms = a.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (ms && a.dnnl_memory_desc_get_size(ms) > 0) {
    if (!mem(ms, &e->us)) return false;
    e->ss = a.dnnl_memory_desc_get_size(ms);
  }
  if (!a.dnnl_memory_desc_equal(mx, &ux)) {
    if (!reorder(&ux, mx, &e->rx) || !mem(mx, &e->bx)) return false;
    e->sx = a.dnnl_memory_desc_get_size(mx);
  }
  if (!a.dnnl_memory_desc_equal(mw, &uw)) {
    if (!reorder(&uw, mw, &e->rw) || !mem(mw, &e->bw)) return false;
    e->sw = a.dnnl_memory_desc_get_size(mw);
  }
  if (!a.dnnl_memory_desc_equal(my, &uy)) {
    if (!reorder(my, &uy, &e->ry) || !mem(my, &e->by)) return false;
    e->sy = a.dnnl_memory_desc_get_size(my);
  }
  return true;
}

bool run_locked(const Api& a, const Conv2dShape& s, const float* x, const float* w, const float* b, float* y) {
  Key k{s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.oh, s.ow, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw, s.groups, b != nullptr};
  auto& c = cache();
  auto it = c.find(k);
  if (it == c.end()) {
    if (c.size() >= 64) c.clear();  // bounded: distinct shapes are few in practice
    auto fresh = std::make_unique<Entry>();
    fresh->api = &a;
    // A shape oneDNN cannot run is remembered as an entry without a primitive, so it is not retried every call.
    if (!build(a, s, b != nullptr, fresh.get())) fresh = std::make_unique<Entry>(), fresh->api = &a;
    it = c.emplace(k, std::move(fresh)).first;
  }
  Entry* e = it->second.get();
  if (!e->conv) return false;
  // Scratch for the blocked copies, from Strata's allocator (which keeps big blocks for reuse).
  auto scratch = [](size_t bytes) {
    const int64_t numel = static_cast<int64_t>((bytes + 3) / 4);
    return bytes ? empty_tensor(IntArrayRef(&numel, 1), ScalarType::Float32, Device()) : Tensor();
  };
  Tensor tx = scratch(e->sx), tw = scratch(e->sw), ty = scratch(e->sy), ts = scratch(e->ss);
  bool ok = a.dnnl_memory_set_data_handle(e->ux, const_cast<float*>(x)) == dnnl_success &&
            a.dnnl_memory_set_data_handle(e->uw, const_cast<float*>(w)) == dnnl_success &&
            a.dnnl_memory_set_data_handle(e->uy, y) == dnnl_success &&
            (!b || a.dnnl_memory_set_data_handle(e->ub, const_cast<float*>(b)) == dnnl_success) &&
            (!e->bx || a.dnnl_memory_set_data_handle(e->bx, tx.data_ptr<float>()) == dnnl_success) &&
            (!e->bw || a.dnnl_memory_set_data_handle(e->bw, tw.data_ptr<float>()) == dnnl_success) &&
            (!e->by || a.dnnl_memory_set_data_handle(e->by, ty.data_ptr<float>()) == dnnl_success) &&
            (!e->us || a.dnnl_memory_set_data_handle(e->us, ts.data_ptr<float>()) == dnnl_success);
  if (!ok) return false;
  auto exec = [&](dnnl_primitive_t p, std::initializer_list<dnnl_exec_arg_t> args) {
    return a.dnnl_primitive_execute(p, a.stream, static_cast<int>(args.size()), args.begin()) == dnnl_success;
  };
  dnnl_memory_t sx = e->bx ? e->bx : e->ux, sw = e->bw ? e->bw : e->uw, sy = e->by ? e->by : e->uy;
  if (e->rx && !exec(e->rx, {{DNNL_ARG_FROM, e->ux}, {DNNL_ARG_TO, e->bx}})) return false;
  if (e->rw && !exec(e->rw, {{DNNL_ARG_FROM, e->uw}, {DNNL_ARG_TO, e->bw}})) return false;
  {
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, sx}, {DNNL_ARG_WEIGHTS, sw}, {DNNL_ARG_DST, sy}};
    int nargs = 3;
    if (b) args[nargs++] = {DNNL_ARG_BIAS, e->ub};
    if (e->us) args[nargs++] = {DNNL_ARG_SCRATCHPAD, e->us};
    if (a.dnnl_primitive_execute(e->conv, a.stream, nargs, args) != dnnl_success) return false;
  }
  if (e->ry && !exec(e->ry, {{DNNL_ARG_FROM, e->by}, {DNNL_ARG_TO, e->uy}})) return false;
  return a.dnnl_stream_wait(a.stream) == dnnl_success;
}

// oneDNN's convolution is used when the library is there, STRATA_DNNL_CONV is not 0, and the start-up check passes.
bool enabled() {
  static const bool on = [] {
    const Api& a = dnnl_runtime::api();
    if (!a.ok || dnnl_runtime::disabled_by("STRATA_DNNL_CONV")) return false;
    if (self_check(a)) return true;
    std::fprintf(stderr, "strata: warning: oneDNN's convolution gave a wrong result in the start-up check; not "
                         "using it\n");
    return false;
  }();
  return on;
}

}  // namespace

bool forward_f32(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y) {
  if (!enabled()) return false;
  std::lock_guard<std::mutex> g(dnnl_runtime::mutex());
  return run_locked(dnnl_runtime::api(), s, x, w, b, y);
}

bool preferred(const Conv2dShape& s) {
  // Measured at one thread against our path: oneDNN wins at every size tried (4.0 vs 4.8 us on a 30 kFLOP
  // 2x3x8x8 convolution, 24 vs 48 us with one input channel, 111 vs 260 us depthwise, 2x on the digits CNN's
  // layers) except 1x1 kernels (73 vs 57 us on 4x16x30x30 -> 24), which our path runs as a plain GEMM. At two
  // threads the tiniest one took 11 us through oneDNN (it always opens a parallel region) against 4.9 us, so
  // convolutions under 0.2 MFLOP stay on our path, which runs those on the calling thread.
  const double flops = 2.0 * s.n * s.o * s.oh * s.ow * (s.c / s.groups) * s.kh * s.kw;
  // oneDNN 2.6 crashes on a zero-size plane; conv_nd rejects those like torch, this keeps any other caller safe.
  return !(s.kh == 1 && s.kw == 1) && s.h > 0 && s.w > 0 && flops >= 2e5 && enabled();
}

#endif

}  // namespace strata::cpu::dnnl_conv
