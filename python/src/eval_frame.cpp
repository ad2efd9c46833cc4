// strata._C._eval_frame: the PEP 523 frame-evaluation hook behind strata.compile.
//
// Note [The frame hook]
// While a callback is installed, CPython hands every frame it is about to run
// to strata_eval_frame() instead of its own evaluator. Each code object carries
// one state in its co_extra slot (our index): none, SKIP, or an entry E (any
// Python object, a strong reference).
//   - Frames that are not plain function frames (generator, coroutine and
//     async-generator code, module and class bodies, frames resumed with an
//     exception thrown in, frames not owned by the thread) and code marked SKIP
//     run on the default evaluator.
//   - Code with no state: cb(code, func) is called with the hook disabled on
//     this thread. None: run normally this time, ask again next time. SKIP:
//     mark the code, run normally. Anything else: store it as the entry and go on.
//   - Code with an entry E: E(args, func) is called with the hook enabled, args
//     being the frame's argument locals read before the frame runs. RUN_DEFAULT:
//     run the frame normally. Any other value is the frame's result and the
//     frame is disposed of without being run; an exception from E is the
//     frame's exception.
// The thread-local "enabled" flag turns the hook off for one thread (the
// runtime turns it off while it compiles, and the callback runs with it off),
// so a frame started there runs on the default evaluator.
//
// Note [Disposing of a frame that never ran]
// The frame handed to us was pushed on the thread's data stack and filled with
// its arguments by CPython, but is not yet linked into the thread's frame chain
// (the evaluator links it when it starts), so no one can reach it and it has no
// frame object. Who clears and pops it depends on the version:
//   3.11: the caller (_PyEval_Vector) clears and pops the frame after the eval
//         function returns, whatever it returned. We only return the result.
//   3.12: the evaluator owns the frame and must clear and pop it itself; the
//         interpreter's own helpers for this (clear_thread_frame,
//         _PyFrame_ClearExceptCode, _PyThreadState_PopFrame) are not exported
//         from libpython. dispose_frame() does the same work on the public
//         layout: drop the references held in localsplus[0, stacktop), the
//         locals mapping, the function and the code, then give the frame's
//         slots back to the data stack (if the frame is the first thing in its
//         chunk, the chunk is returned to the arena allocator and the previous
//         chunk becomes current, as CPython's push/pop pairing expects).
// Before the frame runs, argument slots hold the plain argument values, also
// for arguments that are cell variables: MAKE_CELL and COPY_FREE_VARS are the
// first instructions of the code on both versions, so nothing was wrapped yet.
// No trace or profile event is emitted for a replaced frame on either version:
// both the call and the return event come from inside the evaluator, so a
// profiler sees neither.
//
// Everything that differs between 3.11 and 3.12 is in the table below
// (namespace ver); this is the only file built with Py_BUILD_CORE.

#include <Python.h>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <stdexcept>
#include <string>
#include <vector>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
#define STRATA_EVAL_FRAME_SUPPORTED 1
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#else
#define STRATA_EVAL_FRAME_SUPPORTED 0
#endif

namespace nb = nanobind;

namespace strata::py {

void bind_eval_frame(nb::module_& m);

#if STRATA_EVAL_FRAME_SUPPORTED

namespace {

// ---------------------------------------------------------------------------
// The version table.
namespace ver {

using Frame = _PyInterpreterFrame;

inline PyCodeObject* code(Frame* f) { return f->f_code; }

#if PY_VERSION_HEX >= 0x030C0000  // 3.12
inline PyObject* func(Frame* f) { return f->f_funcobj; }
constexpr bool kEvaluatorOwnsFrame = true;

// Gives the frame's slots back to the thread's data stack (see the Note).
void pop_frame(PyThreadState* ts, Frame* f) {
  PyObject** base = reinterpret_cast<PyObject**>(f);
  _PyStackChunk* chunk = ts->datastack_chunk;
  if (base == &chunk->data[0]) {
    _PyStackChunk* prev = chunk->previous;
    ts->datastack_chunk = prev;
    ts->datastack_top = &prev->data[prev->top];
    ts->datastack_limit = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(prev) + prev->size);
    PyObjectArenaAllocator arena;
    PyObject_GetArenaAllocator(&arena);
    arena.free(arena.ctx, chunk, chunk->size);
  } else {
    ts->datastack_top = base;
  }
}

// Clears and pops a frame that was never run (see the Note).
void dispose_frame(PyThreadState* ts, Frame* f) {
  for (int i = 0; i < f->stacktop; i++) {
    PyObject* v = f->localsplus[i];
    f->localsplus[i] = nullptr;
    Py_XDECREF(v);
  }
  f->stacktop = 0;
  Py_CLEAR(f->f_locals);
  Py_DECREF(f->f_funcobj);
  Py_DECREF(f->f_code);
  pop_frame(ts, f);
}
#else  // 3.11
inline PyObject* func(Frame* f) { return reinterpret_cast<PyObject*>(f->f_func); }
constexpr bool kEvaluatorOwnsFrame = false;
// The caller clears and pops the frame (see the Note).
inline void dispose_frame(PyThreadState*, Frame*) {}
#endif

}  // namespace ver

// ---------------------------------------------------------------------------
// Per-code state.

// One node per code object with a state, owned by the code's extra slot. The
// nodes form a list so that clear_all() can find every code with a state;
// the slot's free function (called when the code dies or its slot is
// replaced) unlinks the node.
struct CodeState {
  PyObject* value;  // strong: the SKIP sentinel or an entry
  PyCodeObject* code;  // borrowed: the node lives exactly as long as the slot
  CodeState* prev;
  CodeState* next;
};

CodeState g_states{nullptr, nullptr, &g_states, &g_states};  // list head
Py_ssize_t g_extra_index = -1;
PyObject* g_skip = nullptr;
PyObject* g_run_default = nullptr;
PyObject* g_callback = nullptr;  // strong, or null when uninstalled
_PyFrameEvalFunction g_previous_eval = nullptr;
thread_local bool t_enabled = true;

void free_state(void* p) {
  if (!p) return;
  auto* s = static_cast<CodeState*>(p);
  s->prev->next = s->next;
  s->next->prev = s->prev;
  PyObject* v = s->value;
  delete s;
  Py_XDECREF(v);  // last: may run arbitrary code
}

inline CodeState* get_state(PyCodeObject* code) {
  void* p = nullptr;
  if (_PyCode_GetExtra(reinterpret_cast<PyObject*>(code), g_extra_index, &p) < 0) {
    PyErr_Clear();
    return nullptr;
  }
  return static_cast<CodeState*>(p);
}

// Replaces the code's state with `value` (null: no state). The old value is
// released after the slot holds the new one, so a destructor that runs then
// sees a consistent table. Returns -1 with an exception set on failure.
int set_state(PyCodeObject* code, PyObject* value) {
  CodeState* old = get_state(code);
  if (!old && !value) return 0;
  CodeState* s = nullptr;
  if (value) {
    s = new CodeState{Py_NewRef(value), code, g_states.prev, &g_states};
    g_states.prev->next = s;
    g_states.prev = s;
  }
  PyObject* old_value = nullptr;
  if (old) {
    old_value = old->value;  // taken over: the free function below drops nothing
    old->value = nullptr;
  }
  if (_PyCode_SetExtra(reinterpret_cast<PyObject*>(code), g_extra_index, s) < 0) {
    if (old) old->value = old_value;  // the slot still holds the old node
    if (s) free_state(s);
    return -1;
  }
  Py_XDECREF(old_value);
  return 0;
}

// Drops the state of every code object; returns how many had one.
Py_ssize_t clear_all_states() {
  std::vector<PyCodeObject*> codes;
  for (CodeState* s = g_states.next; s != &g_states; s = s->next) codes.push_back(s->code);
  for (PyCodeObject* c : codes) Py_INCREF(c);
  for (PyCodeObject* c : codes) {
    if (set_state(c, nullptr) < 0) PyErr_Clear();
  }
  for (PyCodeObject* c : codes) Py_DECREF(c);
  return static_cast<Py_ssize_t>(codes.size());
}

// ---------------------------------------------------------------------------
// The hook.

constexpr int kNotPlainFunction = CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR;

inline PyObject* run_default(PyThreadState* ts, ver::Frame* f, int throwflag) {
  return g_previous_eval(ts, f, throwflag);
}

inline PyObject* fail(PyThreadState* ts, ver::Frame* f) {
  ver::dispose_frame(ts, f);
  return nullptr;
}

// The frame's argument locals as a tuple (new reference), or null without an
// exception when a slot is unexpectedly empty.
PyObject* frame_args(ver::Frame* f, PyCodeObject* code) {
  const int flags = code->co_flags;
  const int n = code->co_argcount + code->co_kwonlyargcount + ((flags & CO_VARARGS) ? 1 : 0) +
                ((flags & CO_VARKEYWORDS) ? 1 : 0);
  for (int i = 0; i < n; i++) {
    if (!f->localsplus[i]) return nullptr;
  }
  PyObject* args = PyTuple_New(n);
  if (!args) return nullptr;
  for (int i = 0; i < n; i++) PyTuple_SET_ITEM(args, i, Py_NewRef(f->localsplus[i]));
  return args;
}

PyObject* strata_eval_frame(PyThreadState* ts, ver::Frame* f, int throwflag) {
  if (!t_enabled || throwflag) return run_default(ts, f, throwflag);
  PyCodeObject* code = ver::code(f);
  if ((code->co_flags & kNotPlainFunction) || !(code->co_flags & CO_OPTIMIZED) || f->f_locals != nullptr ||
      f->owner != FRAME_OWNED_BY_THREAD || f->frame_obj != nullptr)
    return run_default(ts, f, throwflag);
  CodeState* state = get_state(code);
  if (state && state->value == g_skip) return run_default(ts, f, throwflag);
  if (!g_callback) return run_default(ts, f, throwflag);
  PyObject* func = ver::func(f);

  PyObject* entry;  // strong
  if (state) {
    entry = Py_NewRef(state->value);
  } else {
    PyObject* cb = Py_NewRef(g_callback);
    t_enabled = false;
    PyObject* call_args[2] = {reinterpret_cast<PyObject*>(code), func};
    PyObject* r = PyObject_Vectorcall(cb, call_args, 2, nullptr);
    t_enabled = true;
    Py_DECREF(cb);
    if (!r) return fail(ts, f);
    if (r == Py_None) {
      Py_DECREF(r);
      return run_default(ts, f, throwflag);
    }
    if (set_state(code, r) < 0) {
      Py_DECREF(r);
      return fail(ts, f);
    }
    if (r == g_skip) {
      Py_DECREF(r);
      return run_default(ts, f, throwflag);
    }
    entry = r;
  }

  PyObject* args = frame_args(f, code);
  if (!args) {
    Py_DECREF(entry);
    if (PyErr_Occurred()) return fail(ts, f);
    return run_default(ts, f, throwflag);
  }
  PyObject* call_args[2] = {args, func};
  PyObject* result = PyObject_Vectorcall(entry, call_args, 2, nullptr);
  Py_DECREF(args);
  Py_DECREF(entry);
  if (!result) return fail(ts, f);
  if (result == g_run_default) {
    Py_DECREF(result);
    return run_default(ts, f, throwflag);
  }
  ver::dispose_frame(ts, f);
  return result;
}

// ---------------------------------------------------------------------------
// Binding.

PyCodeObject* as_code(nb::handle h, const char* op) {
  if (!PyCode_Check(h.ptr()))
    throw nb::type_error((std::string("_eval_frame.") + op + ": expected a code object, got " +
                          Py_TYPE(h.ptr())->tp_name)
                             .c_str());
  return reinterpret_cast<PyCodeObject*>(h.ptr());
}

struct Sentinel {
  std::string name;
};

}  // namespace

void bind_eval_frame(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_eval_frame", "PEP 523 frame-evaluation hook of strata.compile");
  g_extra_index = _PyEval_RequestCodeExtraIndex(free_state);
  if (g_extra_index < 0) throw nb::python_error();

  nb::class_<Sentinel>(m, "_Sentinel").def("__repr__", [](const Sentinel& s) { return s.name; });
  nb::object skip = nb::cast(Sentinel{"_eval_frame.SKIP"});
  nb::object run_default = nb::cast(Sentinel{"_eval_frame.RUN_DEFAULT"});
  g_skip = skip.inc_ref().ptr();  // live until exit
  g_run_default = run_default.inc_ref().ptr();
  m.attr("SKIP") = skip;
  m.attr("RUN_DEFAULT") = run_default;
  m.attr("supported") = true;

  m.def(
      "set_callback",
      [](nb::object cb) -> nb::object {
        if (!cb.is_none() && !PyCallable_Check(cb.ptr()))
          throw nb::type_error("_eval_frame.set_callback: expected a callable or None");
        nb::object previous = g_callback ? nb::steal(g_callback) : nb::none();
        g_callback = nullptr;
        PyInterpreterState* interp = PyInterpreterState_Get();
        _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
        if (cb.is_none()) {
          if (current == strata_eval_frame) _PyInterpreterState_SetEvalFrameFunc(interp, g_previous_eval);
        } else {
          if (current != strata_eval_frame) {
            g_previous_eval = current;
            _PyInterpreterState_SetEvalFrameFunc(interp, strata_eval_frame);
          }
          g_callback = cb.inc_ref().ptr();
        }
        return previous;
      },
      nb::arg("callback").none(),
      "Installs cb(code, func) -> None | SKIP | entry as the interpreter's frame hook (None uninstalls and "
      "restores the previous evaluator); returns the previous callback.");
  m.def("get_callback", [] { return g_callback ? nb::borrow(g_callback) : nb::none(); });
  m.def(
      "set_enabled",
      [](bool on) {
        bool previous = t_enabled;
        t_enabled = on;
        return previous;
      },
      nb::arg("enabled"), "Turns the hook on or off for the calling thread; returns the previous setting.");
  m.def("is_enabled", [] { return t_enabled; });
  m.def(
      "set_code_state",
      [](nb::handle code, nb::handle state) {
        PyCodeObject* c = as_code(code, "set_code_state");
        if (set_state(c, state.is_none() ? nullptr : state.ptr()) < 0) throw nb::python_error();
      },
      nb::arg("code"), nb::arg("state").none(), "Sets a code object's state: None, SKIP or an entry.");
  m.def(
      "get_code_state",
      [](nb::handle code) -> nb::object {
        CodeState* s = get_state(as_code(code, "get_code_state"));
        return s ? nb::borrow(s->value) : nb::none();
      },
      nb::arg("code"));
  m.def(
      "codes_with_state",
      [] {
        nb::list out;
        for (CodeState* s = g_states.next; s != &g_states; s = s->next)
          out.append(nb::borrow(reinterpret_cast<PyObject*>(s->code)));
        return out;
      },
      "Every code object that has a state (SKIP or an entry).");
  m.def("clear_all", [] { return clear_all_states(); },
        "Drops the state (SKIP or entry) of every code object; returns how many there were.");
}

#else  // not 3.11 or 3.12: the module exists and says so.

void bind_eval_frame(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_eval_frame", "PEP 523 frame-evaluation hook of strata.compile");
  m.attr("supported") = false;
  m.def("set_callback", [](nb::handle) {
    throw std::runtime_error(std::string("_eval_frame.set_callback: the frame hook supports CPython 3.11 and 3.12, not ") +
                             PY_VERSION);
  });
  m.def("get_callback", [] { return nb::none(); });
  m.def("is_enabled", [] { return false; });
}

#endif

}  // namespace strata::py
