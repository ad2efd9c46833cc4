"""strata.mps: torch.mps's API on a build without Apple's Metal backend, which
Strata does not have. Queries say "no device"; calls that need the device
raise RuntimeError naming the call, as torch's builds without MPS do."""

__all__ = ["is_available", "device_count", "manual_seed", "seed", "get_rng_state", "set_rng_state", "synchronize",
           "empty_cache", "current_allocated_memory", "driver_allocated_memory", "set_per_process_memory_fraction"]


def _no_mps(what):
    return RuntimeError(f"strata.mps.{what}() needs the MPS backend, which this build of Strata does not have")


def is_available():
    return False


def device_count():
    return 0


def manual_seed(seed):
    int(seed)  # as torch: checked, then nothing to seed
    return None


def seed():
    raise _no_mps("seed")


def get_rng_state(device="mps"):
    raise _no_mps("get_rng_state")


def set_rng_state(new_state, device="mps"):
    raise _no_mps("set_rng_state")


def synchronize():
    raise _no_mps("synchronize")


def empty_cache():
    raise _no_mps("empty_cache")


def current_allocated_memory():
    raise _no_mps("current_allocated_memory")


def driver_allocated_memory():
    raise _no_mps("driver_allocated_memory")


def set_per_process_memory_fraction(fraction):
    raise _no_mps("set_per_process_memory_fraction")
