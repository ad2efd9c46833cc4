// Tests of the dispatcher (src/dispatch/dispatcher.h): key sets, per-op table
// computation, fallthrough, fallbacks, CompositeImplicit, redispatch, the
// thread-local include/exclude sets, boxed/unboxed calls and registration
// errors. Every test defines its own ops under test_dispatch:: (the dispatcher
// is a process-wide singleton, so names must not collide between tests) and
// restores any global fallback it replaces.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "dispatch/dispatcher.h"
#include "ops/ops.h"

using namespace strata;

namespace {

// Which kernels ran, in order (thread-local so the threading test can check
// that another thread saw a different dispatch).
thread_local std::vector<std::string> g_log;

Tensor full_f32(std::vector<int64_t> sizes, double v, Device dev = Device()) {
  Tensor t = empty_tensor(sizes, ScalarType::Float32, dev);
  fill_(t, v);
  return t;
}

float first(const Tensor& t) { return t.data_ptr<float>()[0]; }

Tensor meta_f32(std::vector<int64_t> sizes) { return empty_tensor(sizes, ScalarType::Float32, Device(DeviceType::Meta)); }

// Restores a global fallback when a test is done with it.
class FallbackRestorer {
 public:
  explicit FallbackRestorer(DispatchKey k) : key_(k), saved_(Dispatcher::get().fallback(k)) {}
  ~FallbackRestorer() { Dispatcher::get().register_fallback(key_, saved_); }

 private:
  DispatchKey key_;
  KernelFunction saved_;
};

// ---- kernels used by the tests ----------------------------------------------

Tensor cpu_plus_one(const Tensor& x) {
  g_log.push_back("cpu");
  return add(x, full_f32({}, 1.0));
}
Tensor meta_same(const Tensor& x) {
  g_log.push_back("meta");
  return empty_tensor(x.sizes(), x.dtype(), x.device());
}
Tensor composite_plus_two(const Tensor& x) {
  g_log.push_back("composite");
  return add(x, full_f32({}, 2.0, x.device()));
}
Tensor autograd_layer(const Tensor& x) {
  g_log.push_back("autograd");
  return x;
}

// A tracer layer: records that it ran, then hands the call to the keys below
// it. Registered with make_kernel_with_keys so it receives the key set.
const OperatorEntry* g_traced_op = nullptr;
Tensor tracer_layer(DispatchKeySet ks, const Tensor& x) {
  g_log.push_back("tracer");
  return redispatch<Tensor, const Tensor&>(*g_traced_op, ks, DispatchKey::Tracer, x);
}

Tensor scale_kernel(const Tensor& x, double factor) {
  g_log.push_back("scale");
  return mul(x, full_f32({}, factor));
}

Tensor wrong_sig_kernel(const Tensor& x, int64_t n) { return x; }
Tensor two_arg_kernel(const Tensor& x, const Tensor& y) { return x; }

}  // namespace

// ---------------------------------------------------------------------------
// Key sets

TEST(DispatchKeySet, PriorityOrder) {
  // Backends below the composite alias below every functionality key, and the
  // functionality keys in their documented priority order.
  std::vector<DispatchKey> order = {DispatchKey::CPU,        DispatchKey::CUDA,        DispatchKey::Meta,
                                    DispatchKey::PrivateUse1, DispatchKey::CompositeImplicit,
                                    DispatchKey::ADInplaceOrView, DispatchKey::Autograd, DispatchKey::Autocast,
                                    DispatchKey::Vmap,       DispatchKey::Functionalize, DispatchKey::Tracer,
                                    DispatchKey::Profiler,   DispatchKey::Sparse,      DispatchKey::Quantized,
                                    DispatchKey::Nested,     DispatchKey::Python};
  for (size_t i = 1; i < order.size(); ++i) {
    DispatchKeySet ks = DispatchKeySet(order[i - 1]).add(order[i]);
    EXPECT_EQ(ks.highest(), order[i]) << dispatch_key_name(order[i - 1]) << " vs " << dispatch_key_name(order[i]);
  }
  for (DispatchKey k : order) {
    EXPECT_EQ(is_backend_key(k), static_cast<int>(k) < 4) << dispatch_key_name(k);
    EXPECT_NE(dispatch_key_name(k), "Undefined");
  }
}

TEST(DispatchKeySet, HighestRemoveBelow) {
  DispatchKeySet ks = DispatchKeySet(DispatchKey::CPU).add(DispatchKey::Autograd).add(DispatchKey::Tracer);
  EXPECT_EQ(ks.highest(), DispatchKey::Tracer);
  EXPECT_EQ(ks.remove(DispatchKey::Tracer).highest(), DispatchKey::Autograd);
  EXPECT_EQ(ks.highest_backend(), DispatchKey::CPU);
  EXPECT_TRUE(ks.has(DispatchKey::Autograd));
  EXPECT_FALSE(ks.has(DispatchKey::Meta));

  DispatchKeySet below = ks.below(DispatchKey::Tracer);
  EXPECT_FALSE(below.has(DispatchKey::Tracer));
  EXPECT_TRUE(below.has(DispatchKey::Autograd));
  EXPECT_TRUE(below.has(DispatchKey::CPU));
  EXPECT_EQ(ks.below(DispatchKey::Autograd), DispatchKeySet(DispatchKey::CPU));
  EXPECT_TRUE(ks.below(DispatchKey::CPU).empty());

  EXPECT_TRUE(DispatchKeySet().empty());
  EXPECT_EQ(DispatchKeySet().highest(), DispatchKey::NumKeys);
  EXPECT_EQ(DispatchKeySet(DispatchKey::Autograd).highest_backend(), DispatchKey::NumKeys);
  // Multiple backends: the highest backend wins (Meta over CPU).
  DispatchKeySet mixed = DispatchKeySet(DispatchKey::CPU).add(DispatchKey::Meta);
  EXPECT_EQ(mixed.highest_backend(), DispatchKey::Meta);
  EXPECT_EQ((ks - DispatchKeySet(DispatchKey::CPU)).highest_backend(), DispatchKey::NumKeys);
  EXPECT_EQ((ks & mixed), DispatchKeySet(DispatchKey::CPU));
  EXPECT_EQ(DispatchKeySet(DispatchKey::Nested).raw(), uint64_t(1) << 44);
  EXPECT_EQ(DispatchKeySet(DispatchKey::Python).raw(), uint64_t(1) << 46);
  EXPECT_EQ(dispatch_key_name(static_cast<DispatchKey>(42)), "Sparse");
  EXPECT_EQ(dispatch_key_name(static_cast<DispatchKey>(43)), "Quantized");
  EXPECT_EQ(dispatch_key_name(static_cast<DispatchKey>(44)), "Nested");
  EXPECT_EQ(dispatch_key_name(DispatchKey::MPS), "MPS");
}

TEST(DispatchKeySet, TensorKeysFollowDevice) {
  EXPECT_EQ(full_f32({2}, 0).key_set(), DispatchKeySet(DispatchKey::CPU));
  EXPECT_EQ(meta_f32({2}).key_set(), DispatchKeySet(DispatchKey::Meta));
  EXPECT_EQ(backend_key_for(DeviceType::PrivateUse1), DispatchKey::PrivateUse1);
}

// ---------------------------------------------------------------------------
// Tables

TEST(Dispatcher, TableComputation) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_dispatch::table(Tensor self) -> Tensor");
  EXPECT_EQ(d.find("test_dispatch::table"), &op);
  EXPECT_EQ(&d.op(op.id()), &op);
  // Before any kernel: nothing for any backend; functionality keys fall
  // through unless a layer registered a fallback (autograd, autocast and the
  // compiler's tracer did).
  EXPECT_FALSE(op.kernel_for(DispatchKey::CPU).valid());
  EXPECT_FALSE(op.fallthrough_keys().has(DispatchKey::Autograd));
  EXPECT_EQ(op.kernel_for(DispatchKey::Autograd).debug_name, "autograd_fallback");
  EXPECT_TRUE(op.fallthrough_keys().has(DispatchKey::Functionalize));
  EXPECT_FALSE(op.fallthrough_keys().has(DispatchKey::CPU));

  d.register_kernel(op, DispatchKey::CPU, make_kernel<&cpu_plus_one>("cpu_plus_one"));
  EXPECT_TRUE(op.has_registered(DispatchKey::CPU));
  EXPECT_TRUE(op.kernel_for(DispatchKey::CPU).valid());
  EXPECT_EQ(op.kernel_for(DispatchKey::CPU).debug_name, "cpu_plus_one");
  EXPECT_EQ(op.source_of(DispatchKey::CPU), DispatchKey::CPU);
  EXPECT_FALSE(op.kernel_for(DispatchKey::Meta).valid());
  EXPECT_FALSE(op.has_registered(DispatchKey::Meta));

  // A kernel on a functionality key takes it out of the fallthrough mask.
  d.register_kernel(op, DispatchKey::Autograd, make_kernel<&autograd_layer>("autograd_layer"));
  EXPECT_FALSE(op.fallthrough_keys().has(DispatchKey::Autograd));
  EXPECT_TRUE(op.fallthrough_keys().has(DispatchKey::Functionalize));
  EXPECT_EQ(op.kernel_for(DispatchKey::Autograd).debug_name, "autograd_layer");

  // Re-registering replaces the kernel and recomputes the table.
  d.register_kernel(op, DispatchKey::CPU, make_kernel<&composite_plus_two>("replaced"));
  EXPECT_EQ(op.kernel_for(DispatchKey::CPU).debug_name, "replaced");

  // An explicit fallthrough kernel makes a key transparent for this op only.
  d.register_kernel(op, DispatchKey::Autograd, KernelFunction::make_fallthrough());
  EXPECT_TRUE(op.fallthrough_keys().has(DispatchKey::Autograd));
}

TEST(Dispatcher, DefRejectsDuplicatesAndFindsOverloads) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& a = d.def("test_dispatch::ov(Tensor self) -> Tensor");
  OperatorEntry& b = d.def("test_dispatch::ov.scalar(Tensor self, Scalar other) -> Tensor");
  EXPECT_THROW(d.def("test_dispatch::ov(Tensor self) -> Tensor"), Error);
  EXPECT_EQ(d.find("test_dispatch::ov"), &a);  // the bare name answers with the first overload
  EXPECT_EQ(d.find("test_dispatch::ov.scalar"), &b);
  auto ovs = d.overloads("test_dispatch::ov");
  ASSERT_EQ(ovs.size(), 2u);
  EXPECT_EQ(ovs[0], &a);
  EXPECT_EQ(ovs[1], &b);
  EXPECT_EQ(d.find("test_dispatch::does_not_exist"), nullptr);
  // Ids are dense: an explicit id that skips ahead is refused.
  EXPECT_THROW(d.def("test_dispatch::bad_id(Tensor self) -> Tensor", 0, static_cast<int>(d.num_ops()) + 5), Error);
}

TEST(Dispatcher, FallthroughSkipsFunctionalityKeyWithoutKernel) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_dispatch::fallthrough(Tensor self) -> Tensor");
  d.register_kernel(op, DispatchKey::CPU, make_kernel<&cpu_plus_one>());
  g_log.clear();
  {
    // Functionalize and Autograd in the key set, no kernel for either: both skipped.
    IncludeDispatchKeyGuard g(DispatchKeySet(DispatchKey::Functionalize).add(DispatchKey::Autograd));
    Tensor r = call_op<Tensor, const Tensor&>(op, full_f32({3}, 1.0));
    EXPECT_FLOAT_EQ(first(r), 2.0f);
  }
  EXPECT_EQ(g_log, std::vector<std::string>{"cpu"});

  // With an Autograd kernel registered, the included Autograd key now runs it.
  d.register_kernel(op, DispatchKey::Autograd, make_kernel<&autograd_layer>());
  g_log.clear();
  {
    IncludeDispatchKeyGuard g{DispatchKeySet(DispatchKey::Autograd)};
    call_op<Tensor, const Tensor&>(op, full_f32({3}, 1.0));
  }
  EXPECT_EQ(g_log, std::vector<std::string>{"autograd"});
  // Not included: Autograd is not in the tensor's keys, so the backend runs.
  g_log.clear();
  call_op<Tensor, const Tensor&>(op, full_f32({3}, 1.0));
  EXPECT_EQ(g_log, std::vector<std::string>{"cpu"});
}

// ---------------------------------------------------------------------------
// Fallbacks

TEST(Dispatcher, BoxedFallbackForFunctionalityKey) {
  Dispatcher& d = Dispatcher::get();
  FallbackRestorer restore(DispatchKey::Python);
  OperatorEntry& plain = d.def("test_dispatch::fb_plain(Tensor self) -> Tensor");
  d.register_kernel(plain, DispatchKey::CPU, make_kernel<&cpu_plus_one>());
  OperatorEntry& own = d.def("test_dispatch::fb_own(Tensor self) -> Tensor");
  d.register_kernel(own, DispatchKey::CPU, make_kernel<&cpu_plus_one>());
  d.register_kernel(own, DispatchKey::Python, make_kernel<&autograd_layer>("own_python"));

  std::vector<std::string> seen;
  d.register_fallback(DispatchKey::Python,
                      KernelFunction::make_boxed(
                          [&seen](const OperatorEntry& op, DispatchKeySet ks, Stack& s) {
                            seen.push_back(op.name());
                            EXPECT_EQ(s.size(), op.schema().args.size());
                            // Like a real layer: ops called by the kernels below do not re-enter it.
                            ExcludeDispatchKeyGuard g{DispatchKeySet(DispatchKey::Python)};
                            redispatch_boxed(op, ks, DispatchKey::Python, s);
                          },
                          "python_fallback"));
  EXPECT_FALSE(plain.fallthrough_keys().has(DispatchKey::Python));
  EXPECT_EQ(plain.kernel_for(DispatchKey::Python).debug_name, "python_fallback");
  Tensor five = full_f32({2}, 5.0), one = full_f32({2}, 1.0), two = full_f32({2}, 2.0);
  g_log.clear();
  {
    IncludeDispatchKeyGuard g{DispatchKeySet(DispatchKey::Python)};
    Tensor r = call_op<Tensor, const Tensor&>(plain, five);
    EXPECT_FLOAT_EQ(first(r), 6.0f);  // the fallback redispatched to the CPU kernel
    call_op<Tensor, const Tensor&>(own, five);
    // Built-in ops without a Python kernel go through the fallback too.
    Tensor s = add(one, two);
    EXPECT_FLOAT_EQ(first(s), 3.0f);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"test_dispatch::fb_plain", "add"}));
  // The op's own Python-key kernel wins over the fallback.
  EXPECT_EQ(g_log, (std::vector<std::string>{"cpu", "autograd"}));
}

TEST(Dispatcher, BoxedFallbackForBackendKey) {
  // An op taking a Device: the device's backend key drives dispatch, so a CUDA
  // fallback can be exercised without CUDA memory.
  Dispatcher& d = Dispatcher::get();
  FallbackRestorer restore(DispatchKey::CUDA);
  OperatorEntry& op = d.def("test_dispatch::make(int n, *, Device? device=None) -> Tensor");
  d.register_kernel(op, DispatchKey::CPU,
                    KernelFunction::make_boxed([](const OperatorEntry&, DispatchKeySet, Stack& s) {
                      int64_t n = s[0].to_int();
                      s.clear();
                      s.emplace_back(full_f32({n}, 1.0));
                    }));
  int calls = 0;
  d.register_fallback(DispatchKey::CUDA,
                      KernelFunction::make_boxed([&calls](const OperatorEntry& o, DispatchKeySet ks, Stack& s) {
                        calls++;
                        EXPECT_EQ(ks.highest_backend(), DispatchKey::CUDA);
                        int64_t n = s[0].to_int();
                        s.clear();
                        s.emplace_back(full_f32({n}, 7.0));
                      }));
  EXPECT_EQ(op.source_of(DispatchKey::CUDA), DispatchKey::CUDA);

  Stack s{IValue(int64_t(3)), IValue(Device(DeviceType::CUDA))};
  call_boxed(op, s);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_FLOAT_EQ(first(s[0].to_tensor()), 7.0f);
  EXPECT_EQ(calls, 1);
  Stack s2{IValue(int64_t(3)), IValue()};
  call_boxed(op, s2);
  EXPECT_FLOAT_EQ(first(s2[0].to_tensor()), 1.0f);
  EXPECT_EQ(calls, 1);

  // Removing the fallback: a clean "no kernel" error again.
  d.register_fallback(DispatchKey::CUDA, KernelFunction());
  Stack s3{IValue(int64_t(3)), IValue(Device(DeviceType::CUDA))};
  EXPECT_THROW(call_boxed(op, s3), NotImplementedError);
}

// ---------------------------------------------------------------------------
// CompositeImplicit

TEST(Dispatcher, CompositeImplicitCoversBackendsWithoutKernel) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_dispatch::comp(Tensor self) -> Tensor");
  d.register_kernel(op, DispatchKey::CompositeImplicit, make_kernel<&composite_plus_two>("composite_plus_two"));
  for (DispatchKey k : {DispatchKey::CPU, DispatchKey::CUDA, DispatchKey::Meta, DispatchKey::PrivateUse1}) {
    EXPECT_EQ(op.source_of(k), DispatchKey::CompositeImplicit) << dispatch_key_name(k);
    EXPECT_EQ(op.kernel_for(k).debug_name, "composite_plus_two");
  }
  g_log.clear();
  Tensor r = call_op<Tensor, const Tensor&>(op, full_f32({2}, 1.0));
  EXPECT_FLOAT_EQ(first(r), 3.0f);
  Tensor m = call_op<Tensor, const Tensor&>(op, meta_f32({4, 5}));
  EXPECT_TRUE(m.device().is_meta());
  EXPECT_EQ(m.numel(), 20);
  EXPECT_EQ(g_log, (std::vector<std::string>{"composite", "composite"}));

  // A backend kernel takes precedence for its own backend only.
  d.register_kernel(op, DispatchKey::CPU, make_kernel<&cpu_plus_one>("cpu_plus_one"));
  EXPECT_EQ(op.source_of(DispatchKey::CPU), DispatchKey::CPU);
  EXPECT_EQ(op.source_of(DispatchKey::Meta), DispatchKey::CompositeImplicit);
  g_log.clear();
  EXPECT_FLOAT_EQ(first(call_op<Tensor, const Tensor&>(op, full_f32({2}, 1.0))), 2.0f);
  call_op<Tensor, const Tensor&>(op, meta_f32({1}));
  EXPECT_EQ(g_log, (std::vector<std::string>{"cpu", "composite"}));
}

TEST(Dispatcher, CompositeOpsSkipFunctionalityFallbacks) {
  // A composite op does not need its own layer kernels: the ops it calls get
  // them. A backend fallback, however, must not hide the composite kernel.
  Dispatcher& d = Dispatcher::get();
  FallbackRestorer restore(DispatchKey::CUDA);
  d.register_fallback(DispatchKey::CUDA, KernelFunction::make_boxed([](const OperatorEntry&, DispatchKeySet, Stack&) {
                        FAIL() << "fallback must not be used for a composite op";
                      }));
  OperatorEntry& op = d.def("test_dispatch::comp2(Tensor self) -> Tensor");
  d.register_kernel(op, DispatchKey::CompositeImplicit, make_kernel<&composite_plus_two>());
  EXPECT_EQ(op.source_of(DispatchKey::CUDA), DispatchKey::CompositeImplicit);
  // Layers without a fallback stay transparent for it; the autograd layer's
  // fallback passes composite ops through (the ops they call record).
  EXPECT_TRUE(op.fallthrough_keys().has(DispatchKey::Functionalize));
}

// ---------------------------------------------------------------------------
// Redispatch and the thread-local sets

TEST(Dispatcher, TracerLayerRedispatchesBelowItself) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_dispatch::traced(Tensor self) -> Tensor");
  g_traced_op = &op;
  d.register_kernel(op, DispatchKey::CPU, make_kernel<&cpu_plus_one>());
  d.register_kernel(op, DispatchKey::Meta, make_kernel<&meta_same>());
  d.register_kernel(op, DispatchKey::Tracer, make_kernel_with_keys<&tracer_layer>("tracer_layer"));
  EXPECT_FALSE(op.fallthrough_keys().has(DispatchKey::Tracer));

  // Not included: the tracer is not in any tensor's key set.
  g_log.clear();
  call_op<Tensor, const Tensor&>(op, full_f32({2}, 0.0));
  EXPECT_EQ(g_log, std::vector<std::string>{"cpu"});

  g_log.clear();
  {
    IncludeDispatchKeyGuard g{DispatchKeySet(DispatchKey::Tracer)};
    Tensor r = call_op<Tensor, const Tensor&>(op, full_f32({2}, 0.0));
    EXPECT_FLOAT_EQ(first(r), 1.0f);
    // The redispatch keeps the backend of the arguments.
    Tensor m = call_op<Tensor, const Tensor&>(op, meta_f32({3}));
    EXPECT_TRUE(m.device().is_meta());
  }
  EXPECT_EQ(g_log, (std::vector<std::string>{"tracer", "cpu", "tracer", "meta"}));

  // The boxed path runs the same layer (its boxed wrapper passes the keys on).
  g_log.clear();
  {
    IncludeDispatchKeyGuard g{DispatchKeySet(DispatchKey::Tracer)};
    Stack s{IValue(full_f32({2}, 4.0))};
    call_boxed(op, s);
    EXPECT_FLOAT_EQ(first(s.back().to_tensor()), 5.0f);
  }
  EXPECT_EQ(g_log, (std::vector<std::string>{"tracer", "cpu"}));
}

TEST(Dispatcher, IncludeExcludeGuardsNestAndRestore) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_dispatch::guarded(Tensor self) -> Tensor");
  g_traced_op = &op;
  d.register_kernel(op, DispatchKey::CPU, make_kernel<&cpu_plus_one>());
  d.register_kernel(op, DispatchKey::Tracer, make_kernel_with_keys<&tracer_layer>());
  auto& tls = tls_local_dispatch_key_set();
  const DispatchKeySet inc0 = tls.included, exc0 = tls.excluded;
  g_log.clear();
  {
    IncludeDispatchKeyGuard inc{DispatchKeySet(DispatchKey::Tracer)};
    EXPECT_TRUE(tls.included.has(DispatchKey::Tracer));
    {
      // Exclusion beats inclusion.
      ExcludeDispatchKeyGuard exc{DispatchKeySet(DispatchKey::Tracer)};
      EXPECT_TRUE(tls.excluded.has(DispatchKey::Tracer));
      call_op<Tensor, const Tensor&>(op, full_f32({1}, 0.0));
      {
        IncludeDispatchKeyGuard inc2{DispatchKeySet(DispatchKey::Tracer)};
        call_op<Tensor, const Tensor&>(op, full_f32({1}, 0.0));
      }
    }
    EXPECT_FALSE(tls.excluded.has(DispatchKey::Tracer));
    call_op<Tensor, const Tensor&>(op, full_f32({1}, 0.0));

    // Another thread has its own (empty) sets.
    std::vector<std::string> other_log;
    std::thread th([&] {
      call_op<Tensor, const Tensor&>(op, full_f32({1}, 0.0));
      other_log = g_log;
    });
    th.join();
    EXPECT_EQ(other_log, std::vector<std::string>{"cpu"});
  }
  EXPECT_EQ(tls.included, inc0);
  EXPECT_EQ(tls.excluded, exc0);
  EXPECT_EQ(g_log, (std::vector<std::string>{"cpu", "cpu", "tracer", "cpu"}));

  // Excluding the tensor's own backend leaves no backend: dispatch falls back to CPU.
  {
    ExcludeDispatchKeyGuard exc{DispatchKeySet(DispatchKey::Meta)};
    DispatchKeySet ks = apply_tls(DispatchKeySet(DispatchKey::Meta), op);
    EXPECT_EQ(ks.highest_backend(), DispatchKey::CPU);
  }
}

// ---------------------------------------------------------------------------
// Boxed and unboxed

TEST(Dispatcher, BoxedAndUnboxedCallsAgree) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_dispatch::scale(Tensor self, float factor=2.0) -> Tensor");
  d.register_kernel(op, DispatchKey::CPU, make_kernel<&scale_kernel>("scale_kernel"));
  const KernelFunction& k = op.kernel_for(DispatchKey::CPU);
  EXPECT_TRUE(k.typed);
  EXPECT_NE(k.unboxed, nullptr);
  EXPECT_TRUE(static_cast<bool>(k.boxed));

  g_log.clear();
  Tensor x = full_f32({3}, 1.5);
  Tensor u = call_op<Tensor, const Tensor&, double>(op, x, 3.0);
  Stack s{IValue(x), IValue(3.0)};
  call_boxed(op, s);
  ASSERT_EQ(s.size(), 1u);  // results replace the arguments
  Tensor b = s[0].to_tensor();
  EXPECT_FLOAT_EQ(first(u), 4.5f);
  EXPECT_FLOAT_EQ(first(b), 4.5f);
  EXPECT_EQ(g_log, (std::vector<std::string>{"scale", "scale"}));
  // An int on the stack is accepted where the schema says float.
  Stack s2{IValue(x), IValue(int64_t(2))};
  call_boxed(op, s2);
  EXPECT_FLOAT_EQ(first(s2[0].to_tensor()), 3.0f);
  // A wrong IValue type is a TypeError, not a crash.
  Stack s3{IValue(x), IValue(std::string("two"))};
  EXPECT_THROW(call_boxed(op, s3), TypeError);
}

TEST(Dispatcher, BoxedOnlyKernelCalledFromCpp) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_dispatch::boxed_only(Tensor self, float factor, int[] dims, *, str mode) -> Tensor");
  std::vector<std::string> seen;
  d.register_kernel(op, DispatchKey::CPU,
                    KernelFunction::make_boxed(
                        [&seen](const OperatorEntry& o, DispatchKeySet ks, Stack& s) {
                          ASSERT_EQ(s.size(), 4u);
                          EXPECT_TRUE(ks.has(DispatchKey::CPU));
                          const Tensor& x = s[0].to_tensor();
                          double f = s[1].to_double();
                          seen.push_back(s[3].to_string() + ":" + std::to_string(s[2].to_int_list().size()));
                          Tensor r = mul(x, full_f32({}, f));
                          s.clear();
                          s.emplace_back(r);
                        },
                        "boxed_scale"));
  EXPECT_EQ(op.kernel_for(DispatchKey::CPU).unboxed, nullptr);
  std::vector<int64_t> dims{0, 1};
  Tensor r = call_op<Tensor, const Tensor&, double, IntArrayRef, std::string_view>(op, full_f32({2}, 2.0), 2.5,
                                                                                  IntArrayRef(dims), "fast");
  EXPECT_FLOAT_EQ(first(r), 5.0f);
  EXPECT_EQ(seen, std::vector<std::string>{"fast:2"});
}

TEST(Dispatcher, BoxedOnlyKernelWithTupleReturn) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_dispatch::split2(Tensor self) -> (Tensor a, Tensor b)");
  d.register_kernel(op, DispatchKey::CPU, KernelFunction::make_boxed([](const OperatorEntry&, DispatchKeySet, Stack& s) {
                      Tensor x = s[0].to_tensor();
                      s.clear();
                      s.emplace_back(add(x, full_f32({}, 1.0)));
                      s.emplace_back(add(x, full_f32({}, 2.0)));
                    }));
  auto [a, b] = call_op<Tensor2, const Tensor&>(op, full_f32({1}, 0.0));
  EXPECT_FLOAT_EQ(first(a), 1.0f);
  EXPECT_FLOAT_EQ(first(b), 2.0f);
}

// ---------------------------------------------------------------------------
// Errors

TEST(Dispatcher, SignatureMismatchAtRegistration) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_dispatch::sig(Tensor self, float factor) -> Tensor");
  try {
    d.register_kernel(op, DispatchKey::CPU, make_kernel<&wrong_sig_kernel>("wrong_sig_kernel"));
    FAIL() << "expected a signature mismatch error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("wrong_sig_kernel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("test_dispatch::sig"), std::string::npos) << msg;
    EXPECT_NE(msg.find("int"), std::string::npos) << msg;
    EXPECT_NE(msg.find("does not match"), std::string::npos) << msg;
  }
  EXPECT_THROW(d.register_kernel(op, DispatchKey::CPU, make_kernel<&two_arg_kernel>()), Error);
  EXPECT_THROW(d.register_kernel(op, DispatchKey::CPU, make_kernel<&cpu_plus_one>()), Error);  // arity
  // The failed registrations left the table untouched.
  EXPECT_FALSE(op.has_registered(DispatchKey::CPU));
  // The matching signature is accepted.
  EXPECT_NO_THROW(d.register_kernel(op, DispatchKey::CPU, make_kernel<&scale_kernel>()));
  // Registering by name for an unknown op is an error too.
  EXPECT_THROW(KernelRegistrar("test_dispatch::nope", DispatchKey::CPU, make_kernel<&cpu_plus_one>()), Error);
}

TEST(Dispatcher, MissingKernelNamesOpAndBackend) {
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_dispatch::cpu_only(Tensor self) -> Tensor");
  d.register_kernel(op, DispatchKey::CPU, make_kernel<&cpu_plus_one>());
  try {
    call_op<Tensor, const Tensor&>(op, meta_f32({2}));
    FAIL() << "expected NotImplementedError";
  } catch (const NotImplementedError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("test_dispatch::cpu_only"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'Meta' backend"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[CPU]"), std::string::npos) << msg;  // lists what it does have
  }
  // Same through the boxed entry point.
  Stack s{IValue(meta_f32({2}))};
  EXPECT_THROW(call_boxed(op, s), NotImplementedError);
  // An op with no kernel at all.
  OperatorEntry& none = d.def("test_dispatch::no_kernels(Tensor self) -> Tensor");
  try {
    call_op<Tensor, const Tensor&>(none, full_f32({1}, 0.0));
    FAIL() << "expected NotImplementedError";
  } catch (const NotImplementedError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'CPU' backend"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[]"), std::string::npos) << msg;
  }
}

TEST(Dispatcher, MixedBackendsPickHighest) {
  // A CPU tensor and a Meta tensor: Meta is the higher backend key, so the Meta
  // kernel runs (and must do its own device checking).
  Dispatcher& d = Dispatcher::get();
  OperatorEntry& op = d.def("test_dispatch::pair(Tensor self, Tensor other) -> Tensor");
  d.register_kernel(op, DispatchKey::CPU, make_kernel<&two_arg_kernel>("cpu_pair"));
  EXPECT_THROW((call_op<Tensor, const Tensor&, const Tensor&>(op, full_f32({1}, 0), meta_f32({1}))),
               NotImplementedError);
  // Built-in binary op: a clean device error, not a crash.
  EXPECT_THROW(add(full_f32({2}, 0), meta_f32({2})), Error);
}
