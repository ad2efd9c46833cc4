"""strata.utils.mobile_optimizer: torch's mobile (lite interpreter) optimizer. Strata has neither TorchScript modules
nor a mobile runtime, so optimize_for_mobile raises and says so."""

import enum

__all__ = ["LintCode", "MobileOptimizerType", "generate_mobile_module_lints", "optimize_for_mobile"]


class MobileOptimizerType(enum.IntEnum):
    CONV_BN_FUSION = 0
    INSERT_FOLD_PREPACK_OPS = 1
    REMOVE_DROPOUT = 2
    FUSE_ADD_RELU = 3
    HOIST_CONV_PACKED_PARAMS = 4
    VULKAN_AUTOMATIC_GPU_TRANSFER = 5


class LintCode(enum.Enum):
    BUNDLED_INPUT = 1
    REQUIRES_GRAD = 2
    DROPOUT = 3
    BATCHNORM = 4


def _unsupported(what):
    return NotImplementedError(
        f"strata.utils.mobile_optimizer.{what}: needs a TorchScript module and PyTorch Mobile's lite interpreter; "
        "Strata has neither (export with strata.onnx.export or strata.export instead)")


def optimize_for_mobile(script_module, optimization_blocklist=None, preserved_methods=None, backend="CPU"):
    raise _unsupported("optimize_for_mobile")


def generate_mobile_module_lints(script_module):
    raise _unsupported("generate_mobile_module_lints")
