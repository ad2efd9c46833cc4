"""The main job (examples/main.py) as a smoke test under each framework, plus
the framework-independent pieces (the generated corpus, the progress bar).

The full runs enforce thresholds (>= 97% digits accuracy, charlm validation
loss < 0.6x unigram entropy); these tests use --quick (a few steps, no
thresholds) and check that both jobs run end to end: training, loss-curve PNGs,
checkpoints that reload to identical predictions, sampling and the profiler."""

import importlib.util
import io
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, EXAMPLES)

OUTPUTS = ["digits_curves.png", "digits_cnn.pt", "charlm_curves.png", "charlm.pt"]


def _missing(*modules):
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _run_main(framework, out_dir):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.join(ROOT, "python"), env.get("PYTHONPATH")] if p)
    env["MPLBACKEND"] = "Agg"
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, "main.py"), "--framework", framework, "--quick",
                           "--out", str(out_dir)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"main.py --framework {framework} --quick failed:\n{log[-6000:]}"
    for name in OUTPUTS:
        path = out_dir / name
        assert path.is_file() and path.stat().st_size > 0, f"{name} not written\n{log[-3000:]}"
    for name in ("digits_curves.png", "charlm_curves.png"):
        assert (out_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{name} is not a PNG"
    assert "reloaded model gives identical predictions" in proc.stdout
    assert "summary" in proc.stdout and "main job:" in proc.stdout
    assert "digits: profile of" in proc.stdout and "charlm: profile of" in proc.stdout
    if framework == "torch":
        assert "Self CPU" in proc.stdout, "profile table missing"
    elif importlib.util.find_spec("strata.profiler") is not None:
        assert "profiler is not available" not in proc.stdout, "strata.profiler exists but was not used"
    return proc.stdout


def _strata_has_training_api():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    try:
        import strata
    except ImportError as e:
        return False, f"strata not importable: {e}"
    missing = []
    if not hasattr(getattr(strata, "nn", None), "Module"):
        missing.append("strata.nn.Module")
    if not hasattr(getattr(strata, "optim", None), "AdamW"):
        missing.append("strata.optim.AdamW")
    if not hasattr(strata.Tensor, "grad_fn"):
        missing.append("strata.Tensor.grad_fn")
    if missing:
        return False, "not merged yet: " + ", ".join(missing)
    # The pieces above exist on main before every derivative the two jobs need does; skip (naming them) only
    # while a derivative is reported as not implemented, so any other failure still fails the test.
    F = strata.nn.functional
    x = strata.randn(2, 1, 4, 4, requires_grad=True)
    probes = {
        "conv2d": lambda: F.conv2d(x, strata.randn(2, 1, 3, 3), padding=1),
        "linear": lambda: F.linear(x.reshape(2, 16), strata.randn(3, 16)),
        "layer_norm": lambda: F.layer_norm(x, (4,)),
        "gelu": lambda: F.gelu(x),
        "relu": lambda: F.relu(x),
        "embedding": lambda: F.embedding(strata.tensor([0, 1]), x.reshape(2, 16)),
        "scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(x, x, x, is_causal=True),
        "cross_entropy": lambda: F.cross_entropy(x.reshape(2, 16), strata.tensor([0, 3])),
    }
    for name, fn in probes.items():
        try:
            fn().sum().backward()
        except NotImplementedError as e:
            missing.append(f"{name} ({e})")
    return not missing, "not merged yet: " + ", ".join(missing)


def test_main_job_quick_torch(tmp_path):
    pytest.importorskip("torch")
    if _missing("sklearn", "matplotlib"):
        pytest.skip(f"needs {', '.join(_missing('sklearn', 'matplotlib'))} (requirements-dev.txt)")
    out = _run_main("torch", tmp_path)
    assert "digits: test accuracy" in out and "charlm: validation loss" in out


_HAS_API, _WHY = _strata_has_training_api()


@pytest.mark.skipif(not _HAS_API, reason=_WHY)
def test_main_job_quick_strata(tmp_path):
    if _missing("sklearn", "matplotlib"):
        pytest.skip(f"needs {', '.join(_missing('sklearn', 'matplotlib'))} (requirements-dev.txt)")
    _run_main("strata", tmp_path)


def test_corpus_matches_generator():
    spec = importlib.util.spec_from_file_location("make_corpus", os.path.join(EXAMPLES, "data", "make_corpus.py"))
    make_corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_corpus)
    path = os.path.join(EXAMPLES, "data", "corpus.txt")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text == make_corpus.generate(), "examples/data/corpus.txt is stale: rerun examples/data/make_corpus.py"
    assert 200_000 <= len(text.encode()) <= 400_000


def test_corpus_entropy_and_windows():
    import train_charlm

    text, chars, stoi, ids, entropy = train_charlm.load_corpus(train_charlm.CORPUS)
    assert "".join(chars[i] for i in ids[:500]) == text[:500]
    # English-like text sits near 3 nats/char of unigram entropy; far off means the generator broke.
    assert 2.5 < entropy < 3.5
    x, y = train_charlm.windows(ids[:1000], 16, 8)
    assert x.shape == y.shape and x.shape[1] == 16
    np.testing.assert_array_equal(x[3, 1:], y[3, :-1])
    np.testing.assert_array_equal(x[3], ids[24:40])


def test_progress_bar_plain_lines_when_not_a_tty():
    from common import Progress

    buf = io.StringIO()  # not a TTY: periodic plain lines, no carriage returns
    bar = Progress(100, "job", "samples", stream=buf)
    for step in range(1, 101):
        bar.update(step, 1.0 / step, 32)
    bar.close()
    lines = buf.getvalue().splitlines()
    assert "\r" not in buf.getvalue()
    assert len(lines) == 10 and "100/100" in lines[-1] and "samples/s" in lines[-1] and "loss" in lines[-1]


def test_progress_bar_rewrites_one_line_on_a_tty():
    from common import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    buf = Tty()
    bar = Progress(5, "job", "tok", stream=buf)
    for step in range(1, 6):
        bar.update(step, 0.5, 64)
    bar.close()
    out = buf.getvalue()
    assert out.count("\r") == 5 and out.count("\n") == 1 and "tok/s" in out


def test_framework_selection():
    import framework

    with pytest.raises(ValueError, match="unknown framework"):
        framework.load_framework("jax")
    st = framework.load_framework("strata")
    assert st.__name__ == "strata"
    if importlib.util.find_spec("torch") is not None:
        import torch

        assert framework.load_framework("torch") is torch
        assert framework.profiler_module(torch) is torch.profiler
