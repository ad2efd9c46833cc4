"""strata.utils.cpp_extension: a C++ extension written against Strata's API is compiled, loaded and its ops called
(one small compile, about 5 s); torch-API sources and CUDA are refused with clear errors."""

import os
import shutil

import pytest

import strata
from strata.utils import cpp_extension

SOURCE = r"""
namespace {
using namespace strata;
Tensor twice_plus(const Tensor& a, double c) { return add(add(a, a), full_like(a, Scalar(c))); }
const bool registered = [] {
  Dispatcher::get().def("surfext::twice_plus(Tensor a, float c=0.0) -> Tensor");
  return true;
}();
}  // namespace
STRATA_LIBRARY_IMPL("surfext::twice_plus", CompositeImplicit, twice_plus);
"""


def _can_build():
    try:
        cpp_extension.include_paths()
    except OSError:
        return False
    return shutil.which(os.environ.get("CXX", "c++")) is not None


@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    if not _can_build():
        pytest.skip("no C++ compiler or no Strata headers (not a source checkout)")
    build = tmp_path_factory.mktemp("surfext")
    return cpp_extension.load_inline("surfext", SOURCE, functions=["twice_plus"], build_directory=str(build)), build


def test_load_inline_builds_and_binds_the_ops(ext):
    mod, build = ext
    assert mod.__all__ == ["twice_plus"]
    out = mod.twice_plus(strata.tensor([1.0, 2.0]), 0.5)
    assert out.tolist() == [2.5, 4.5]
    assert strata.ops.surfext.twice_plus(strata.ones(2)).tolist() == [2.0, 2.0]
    assert os.path.exists(mod.__file__) and mod.__file__.startswith(str(build))


def test_load_reuses_an_unchanged_build(ext):
    mod, build = ext
    before = sorted(os.listdir(build))
    again = cpp_extension.load("surfext", [os.path.join(build, "main.cpp")], build_directory=str(build))
    assert sorted(os.listdir(build)) == before and again.__file__ == mod.__file__


def test_build_errors_are_reported(tmp_path):
    if not _can_build():
        pytest.skip("no C++ compiler or no Strata headers")
    with pytest.raises(RuntimeError, match="Error building extension 'broken'"):
        cpp_extension.load_inline("broken", "this is not C++;", build_directory=str(tmp_path))


def test_torch_api_sources_are_refused(tmp_path):
    src = tmp_path / "ext.cpp"
    src.write_text("#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n")
    with pytest.raises(RuntimeError, match="torch's C\\+\\+ API.*STRATA_LIBRARY_IMPL"):
        cpp_extension.load("torchapi", [str(src)], build_directory=str(tmp_path))


def test_cuda_is_refused_and_setuptools_helpers():
    with pytest.raises(OSError, match="CUDA is not available"):
        cpp_extension.CUDAExtension("x", ["x.cu"])
    with pytest.raises(OSError, match="CUDA"):
        cpp_extension.load_inline("x", "", cuda_sources="__global__ void k() {}")
    if _can_build():
        e = cpp_extension.CppExtension("myext", ["a.cpp"])
        assert "strata" in e.libraries and cpp_extension.include_paths()[0] in e.include_dirs
    build_ext = cpp_extension.BuildExtension
    assert hasattr(build_ext, "with_options") and issubclass(build_ext.with_options(use_ninja=False), build_ext)
    assert cpp_extension.CUDA_HOME is None
