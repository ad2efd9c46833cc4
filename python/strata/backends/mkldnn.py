"""strata.backends.mkldnn: oneDNN (formerly MKL-DNN), which the CPU core uses for
matmul and convolution when libdnnl can be loaded (src/backends/cpu/dnnl_*).
`enabled` is a module attribute kept for scripts; the core decides by itself."""

from ._libs import loadable

enabled = True
deterministic = False


def is_available():
    return loadable("libdnnl.so.2", "libdnnl.so.3", "libdnnl.so")
