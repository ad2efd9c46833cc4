"""strata.hub: torch.hub's cache layout, without downloads.

Strata never fetches anything at run time. What torch.hub would download is
looked up where torch.hub keeps it (`get_dir()`: $TORCH_HOME/hub, by default
~/.cache/torch/hub): checkpoints under `<hub dir>/checkpoints/<file name>` and
GitHub repositories under `<hub dir>/<owner>_<repo>_<ref>`. A file or
repository already there loads exactly as torch loads it; one that is not
raises RuntimeError naming the path to put it at. `source="local"` loads a
hubconf.py from any directory, as in torch."""

import errno
import importlib.util
import os
import re
import sys
from urllib.parse import urlparse  # noqa: F401  (torch.hub.urlparse)

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url", "set_dir"]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
MODULE_HUBCONF = "hubconf.py"
VAR_DEPENDENCY = "dependencies"
ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"

_hub_dir = None


def _get_torch_home():
    return os.path.expanduser(
        os.getenv(ENV_TORCH_HOME, os.path.join(os.getenv(ENV_XDG_CACHE_HOME, DEFAULT_CACHE_DIR), "torch")))


def get_dir():
    """The hub cache directory: set_dir's, else $TORCH_HOME/hub (~/.cache/torch/hub by default)."""
    if _hub_dir is not None:
        return _hub_dir
    return os.path.join(_get_torch_home(), "hub")


def set_dir(d):
    """Sets the hub cache directory (`~` expanded, as torch does)."""
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


def _no_download(what, url, dst):
    return RuntimeError(
        f"strata.hub: {what} {url!r} is not in the local cache and Strata does not download at run time; "
        f"put the file at {dst!r} (or pass model_dir=/set strata.hub.set_dir to where it is)")


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Always raises: Strata does not download at run time (place the file at `dst` yourself)."""
    raise _no_download("download of", url, dst)


def _is_legacy_zip_format(filename):
    # The pre-1.6 hub format: a zip archive holding one legacy-format checkpoint.
    import zipfile  # here, not at import: zipfile and hashlib cost ~10 ms of strata's import time

    if zipfile.is_zipfile(filename):
        infolist = zipfile.ZipFile(filename).infolist()
        return len(infolist) == 1 and not infolist[0].is_dir()
    return False


def _legacy_zip_load(filename, model_dir, map_location, weights_only):
    import zipfile

    with zipfile.ZipFile(filename) as f:
        members = f.infolist()
        if len(members) != 1:
            raise RuntimeError("Only one file(not dir) is allowed in the zipfile")
        f.extractall(model_dir)
        extracted = os.path.join(model_dir, members[0].filename)
    from .serialization import load
    return load(extracted, map_location=map_location, weights_only=weights_only)


def _check_hash(path, url, filename):
    r = HASH_REGEX.search(filename)
    prefix = r.group(1) if r else None
    if prefix:
        import hashlib

        sha = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                sha.update(chunk)
        digest = sha.hexdigest()
        if digest[:len(prefix)] != prefix:
            raise RuntimeError(f'invalid hash value (expected "{prefix}", got "{digest}")')


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True, check_hash=False, file_name=None,
                             weights_only=False):
    """Loads the checkpoint `url` names from the hub cache: `<model_dir>/<file name>`
    (model_dir defaults to `<get_dir()>/checkpoints`; the file name is the URL's last
    path component unless `file_name` is given). With check_hash, a file named
    `name-<sha256 prefix>.ext` must match that prefix. A file not in the cache
    raises RuntimeError: Strata does not download."""
    if os.getenv("TORCH_MODEL_ZOO"):
        import warnings
        warnings.warn("TORCH_MODEL_ZOO is deprecated, please use env TORCH_HOME instead", stacklevel=2)
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    try:
        os.makedirs(model_dir, exist_ok=True)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise
    filename = file_name if file_name is not None else os.path.basename(urlparse(url).path)
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        raise _no_download("checkpoint", url, cached_file)
    if check_hash:
        _check_hash(cached_file, url, filename)
    if _is_legacy_zip_format(cached_file):
        return _legacy_zip_load(cached_file, model_dir, map_location, weights_only)
    from .serialization import load
    return load(cached_file, map_location=map_location, weights_only=weights_only)


def _parse_repo_info(github):
    if ":" in github:
        owner_name, ref = github.split(":", 1)
    else:
        owner_name, ref = github, None
    if "/" not in owner_name:
        raise ValueError(f'Invalid input: repo_or_dir should be of the form "owner/name[:ref]", got {github!r}')
    owner, name = owner_name.split("/", 1)
    return owner, name, ref


def _cached_repo(github, force_reload):
    # torch.hub keeps a repository at <hub dir>/<owner>_<name>_<ref> ('/' in the ref
    # becomes '_'); with no ref it uses main when that exists, else master.
    owner, name, ref = _parse_repo_info(github)
    hub_dir = get_dir()
    refs = [ref] if ref is not None else ["main", "master"]
    candidates = [os.path.join(hub_dir, "_".join([owner, name, r.replace("/", "_")])) for r in refs]
    if not force_reload:
        for repo_dir in candidates:
            if os.path.exists(repo_dir):
                return repo_dir
    raise RuntimeError(
        f"strata.hub: repository {github!r} is not in the local cache and Strata does not download at run time"
        + (" (force_reload=True asks for a fresh download)" if force_reload else "")
        + f"; put a checkout at {candidates[0]!r}, or pass its directory with source='local'")


def _import_hubconf(repo_dir):
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    spec = importlib.util.spec_from_file_location(MODULE_HUBCONF, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, repo_dir)
    try:
        spec.loader.exec_module(module)
    finally:
        try:
            sys.path.remove(repo_dir)
        except ValueError:
            pass
    return module


def _check_dependencies(m):
    deps = getattr(m, VAR_DEPENDENCY, None)
    if deps is not None:
        missing = [pkg for pkg in deps if importlib.util.find_spec(pkg) is None]
        if missing:
            raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")


def _load_entry_from_hubconf(m, model):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    _check_dependencies(m)
    func = getattr(m, model, None)
    if func is None or not callable(func):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return func


def _repo_dir(repo_or_dir, source, force_reload):
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    return _cached_repo(repo_or_dir, force_reload) if source == "github" else repo_or_dir


def list(github, force_reload=False, skip_validation=False, trust_repo=None, verbose=True):
    """The public callables of a cached repository's hubconf.py."""
    m = _import_hubconf(_cached_repo(github, force_reload))
    return [f for f in dir(m) if callable(getattr(m, f)) and not f.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo=None):
    """The docstring of entry point `model` of a cached repository's hubconf.py."""
    return _load_entry_from_hubconf(_import_hubconf(_cached_repo(github, force_reload)), model).__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo=None, force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """Calls entry point `model` of hubconf.py with *args/**kwargs: from a directory
    with source='local', or from a repository already in the hub cache with
    source='github' (not downloaded: RuntimeError naming where it belongs)."""
    repo_dir = _repo_dir(repo_or_dir, source, force_reload)
    sys.path.insert(0, repo_dir)
    try:
        m = _import_hubconf(repo_dir)
        return _load_entry_from_hubconf(m, model)(*args, **kwargs)
    finally:
        try:
            sys.path.remove(repo_dir)
        except ValueError:
            pass
