"""The project's models, compiled: the main job's two models (examples/train_charlm.py's
character transformer, examples/train_digits.py's convolutional net) and the model classes of
the unmodified torch scripts in tests/python/scripts/ (ResNet, UNet, LSTM language model,
einsum attention block), each trained for 3 steps compiled and eagerly from the same start:
losses, gradients, parameters and buffers after every step agree bit for bit under
backend="eager", and to float tolerance under the default backend (strata_cpp: generated kernels
round a few functions differently in the last bit). Also the recompiles a changing batch size
costs today."""

import importlib.util
import pathlib
import sys
import warnings

import strata as st
import strata.nn as nn
import strata.nn.functional as F

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "tests" / "python" / "scripts"
EXAMPLES = ROOT / "examples"



def load_script(name):
    """A torch script of tests/python/scripts as a module whose `torch` is strata (the script's
    text unchanged; its main() is not run). Works when the real torch is imported too."""
    alias = {"torch": st, "torch.nn": st.nn, "torch.nn.functional": st.nn.functional, "torch.utils": st.utils,
             "torch.utils.data": st.utils.data}
    saved = {k: sys.modules.get(k) for k in alias}
    sys.modules.update(alias)
    try:
        spec = importlib.util.spec_from_file_location(f"_compiled_models_{name}", SCRIPTS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mod


def load_example(name):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


def exact(a, b, what, tol=None):
    assert a.shape == b.shape and a.dtype == b.dtype, what
    if tol is None:
        assert st.equal(a, b), f"{what}: max |diff| {(a - b).abs().max().item()}"
    else:
        assert st.allclose(a, b, rtol=tol, atol=tol), f"{what}: max |diff| {(a - b).abs().max().item()}"


def train_compare(make_model, batch, loss_fn, make_opt, steps=3, forward=None, backend="eager", tol=None):
    """Trains two models built from the same seed, one through strata.compile(backend=backend), and
    compares everything after each step (bit for bit, or to tol)."""
    st.manual_seed(0)
    m_e = make_model()
    st.manual_seed(0)
    m_c = make_model()
    cm = st.compile(m_c) if backend is None else st.compile(m_c, backend=backend)
    forward = forward or (lambda m, inputs: m(*inputs))
    opt_e, opt_c = make_opt(m_e.parameters()), make_opt(m_c.parameters())
    for step in range(steps):
        inputs, target = batch(step)
        losses = []
        for m, opt in ((m_e, opt_e), (cm, opt_c)):
            st.manual_seed(100 + step)     # dropout draws the same masks in both runs
            opt.zero_grad()
            loss = loss_fn(forward(m, inputs), target)
            loss.backward()
            losses.append(loss)
            opt.step()
        exact(losses[1].detach(), losses[0].detach(), f"loss at step {step}", tol)
        for (n, pe), (_, pc) in zip(m_e.named_parameters(), m_c.named_parameters()):
            exact(pc.grad, pe.grad, f"grad of {n} at step {step}", tol)
            exact(pc.detach(), pe.detach(), f"{n} after step {step}", tol)
        for (n, be), (_, bc) in zip(m_e.named_buffers(), m_c.named_buffers()):
            exact(bc, be, f"buffer {n} after step {step}", tol)
    # Evaluation mode: a recompile (the training flag is guarded), same outputs.
    m_e.eval()
    m_c.eval()
    inputs, _ = batch(steps)
    with st.no_grad():
        out_e, out_c = forward(m_e, inputs), forward(cm, inputs)
    for a, b in zip(_flat(out_e), _flat(out_c)):
        exact(b, a, "eval output", tol)
    return cm


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [t for e in x for t in _flat(e)]
    return [x]


def compiled_entries(fn):
    from strata._dynamo import eval_frame
    return {st_.code.co_qualname: len(st_.entries) for st_ in eval_frame._states.values() if st_.entries}


# -- the main job's models ------------------------------------------------------------------------

def test_char_transformer_of_the_main_job():
    charlm = load_example("train_charlm")
    vocab, block = 20, 16

    def make():
        return charlm.build_model(st, vocab, block, d_model=32, n_layers=2, n_heads=4, dropout=0.1)

    def batch(step):
        g = st.Generator().manual_seed(step)
        x = st.randint(0, vocab, (4, block), generator=g)
        return (x,), st.randint(0, vocab, (4, block), generator=g)

    for backend, tol in (("eager", None), (None, 1e-5)):
        st.compiler.reset()
        cm = train_compare(make, batch, lambda logits, y: charlm.lm_loss(F, logits, y),
                           lambda p: st.optim.AdamW(p, lr=3e-3, weight_decay=0.1), backend=backend, tol=tol)
        assert compiled_entries(cm)   # something was compiled (not all eager)


def test_digit_net_of_the_main_job():
    digits = load_example("train_digits")

    def batch(step):
        g = st.Generator().manual_seed(step)
        return (st.randn(8, 1, 8, 8, generator=g),), st.randint(0, 10, (8,), generator=g)

    for backend, tol in (("eager", None), (None, 1e-5)):
        st.compiler.reset()
        train_compare(lambda: digits.build_model(st), batch, F.cross_entropy,
                      lambda p: st.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True), backend=backend, tol=tol)


# -- the torch scripts' models --------------------------------------------------------------------

def test_resnet_of_train_resnet_script():
    rs = load_script("train_resnet")

    def batch(step):
        g = st.Generator().manual_seed(step)
        return (st.randn(4, 3, 16, 16, generator=g),), st.randint(0, 10, (4,), generator=g)

    train_compare(lambda: rs.ResNet(num_blocks=(1, 1), width=8), batch, F.cross_entropy,
                  lambda p: st.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=5e-4))


def test_unet_of_unet_script():
    un = load_script("unet")

    def batch(step):
        g = st.Generator().manual_seed(step)
        x = st.randn(2, 1, 16, 16, generator=g)
        return (x,), (x > 0.3).float()

    train_compare(lambda: un.UNet(cin=1, classes=1, w=8), batch, un.dice_loss,
                  lambda p: st.optim.Adam(p, lr=1e-3))


def test_lstm_language_model_of_lstm_lm_script():
    lm = load_script("lstm_lm")
    ntoken, bptt, bsz = 30, 6, 3

    def batch(step):
        g = st.Generator().manual_seed(step)
        return st.randint(0, ntoken, (bptt, bsz), generator=g), st.randint(0, ntoken, (bptt * bsz,), generator=g)

    state = {}

    def forward(m, inp):
        model = getattr(m, "_orig_mod", m)
        hidden = state.get(id(model)) or model.init_hidden(bsz)
        out, hidden = m(inp, hidden)
        state[id(model)] = lm.repackage_hidden(hidden)
        return out

    train_compare(lambda: lm.RNNModel(ntoken, ninp=16, nhid=16, nlayers=2, dropout=0.2), batch,
                  F.cross_entropy, lambda p: st.optim.SGD(p, lr=0.5), forward=forward)


def test_einsum_attention_block_of_einsum_attention_script():
    ea = load_script("einsum_attention")

    def batch(step):
        g = st.Generator().manual_seed(step)
        x = st.randn(2, 8, 32, generator=g)
        return (x,), st.randn(2, 8, 32, generator=g)

    for backend, tol in (("eager", None), (None, 1e-5)):
        st.compiler.reset()
        train_compare(lambda: nn.Sequential(ea.Block(32, 4), ea.Block(32, 4)), batch, F.mse_loss,
                      lambda p: st.optim.Adam(p, lr=1e-3), backend=backend, tol=tol)


def test_compiled_function_train_step_matches_eager():
    """A whole training step (forward, loss, backward, optimizer step) inside one compiled function:
    backward() and step() are graph breaks, the parameters still match eager bit for bit."""
    def make():
        return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))

    results = []
    for compiled in (False, True):
        st.manual_seed(0)
        m = make()
        opt = st.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss.detach()

        fn = st.compile(step) if compiled else step
        losses = []
        for i in range(3):
            g = st.Generator().manual_seed(i)
            losses.append(fn(st.randn(5, 6, generator=g), st.randint(0, 3, (5,), generator=g)))
        results.append((losses, [p.detach().clone() for p in m.parameters()]))
    for a, b in zip(results[0][0] + results[0][1], results[1][0] + results[1][1]):
        exact(b, a, "train step")


# -- recompiles for a changing batch size ----------------------------------------------------------

BATCH_SIZES = list(range(8, 129, 8))     # 8, 16, ..., 128


def _batch_size_sweep(dynamic=None):
    st.manual_seed(0)
    m = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 4))
    cm = st.compile(m, dynamic=dynamic)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for bs in BATCH_SIZES:
            x = st.randn(bs, 12)
            exact(cm(x), m(x), f"batch {bs}")
    from strata._dynamo import eval_frame
    fwd_states = [s for s in eval_frame._states.values() if s.entries or s.eager]
    return fwd_states, [w for w in caught if "recompiled" in str(w.message)]


def test_batch_size_changes_recompile_once_per_size_until_the_cache_limit():
    """With dynamic=False sizes are specialized: each new batch size is a new entry, up to
    cache_size_limit; then the frame runs eagerly, with one warning naming the failing guard (results
    stay right)."""
    limit = min(st._dynamo.config.cache_size_limit, st._dynamo.config.recompile_limit)
    states, warns = _batch_size_sweep(dynamic=False)
    assert len(states) == 1
    assert len(states[0].entries) == min(limit, len(BATCH_SIZES))
    assert states[0].eager == (len(BATCH_SIZES) > limit)
    assert len(warns) == 1 and "size" in str(warns[0].message)


def test_batch_size_changes_compile_at_most_twice():
    states, _ = _batch_size_sweep()
    assert len(states) == 1 and len(states[0].entries) <= 2 and not states[0].eager
