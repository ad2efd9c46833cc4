"""Count which parts of torch's Python API real PyTorch projects use.

    python bench/api_usage/extract.py OWNER/NAME=PATH[@REV] [...] [--mirrors DIR] [--out torch_api_usage.json]

PATH is a git directory (a bare mirror is fine: the files of REV, default HEAD,
are read with `git cat-file`, no checkout needed) or a plain folder. With
`--mirrors DIR`, every DIR/OWNER+NAME/repo git directory is a project too. Every `.py` file and
every code cell of every `.ipynb` notebook is parsed with `ast` (files that do
not parse, e.g. Python 2, are skipped and counted). The output keeps only
counts: for each API name, how many projects use it and how many times in all;
never any of the projects' code.

What is counted, per file:
- Import aliases are resolved against the installed torch: `import torch`,
  `import torch as th`, `import torch.nn as nn`, `import torch.nn.functional as F`,
  `from torch import nn`, `from torch.nn import functional as F` bind module
  aliases; `from torch.nn import Linear` binds a symbol, counted where it is used.
- Every maximal attribute chain rooted at such an alias (`torch.x`, `nn.X`,
  `F.x`, `nn.init.x`, `torch.linalg.x`, ...) is resolved through torch's modules
  to the first object that is not a module: `nn.Module.__init__` counts
  `torch.nn.Module`, `F.relu` counts `torch.nn.functional.relu`. Private names
  and names that torch (this version) does not have are dropped.
- Tensor methods: a call `<expr>.name(...)` whose receiver is not a module alias,
  not `self`/`cls`/`super()`, not a literal and not the result of calling another
  library directly (`np.zeros(3).sum()`), with `name` a public callable
  attribute of torch.Tensor; and an attribute read `<expr>.name` (not called)
  with `name` one of torch.Tensor's properties (`shape`, `T`, `grad`, ...).
  These are candidates: `list.sort()` or `args.device` count too. They are
  reported as `Tensor.<name>`. Two filters drop the commonest false hits:
  names whose uses here are overwhelmingly other types' (`d.values()`,
  `args.name`, PIL's `img.resize()`, a queue's `q.put()`), and `s.split()`
  called with no argument or a string (str.split; Tensor.split takes sizes).
"""

import argparse
import ast
import json
import os
import subprocess
import sys
import types
import warnings
from collections import Counter, defaultdict

import torch

warnings.filterwarnings("ignore")

_SKIP_RECEIVERS = {"self", "cls"}
_NOT_TENSOR = {"values", "name", "resize", "put"}


def _tensor_names():
    methods, props = set(), set()
    for name in dir(torch.Tensor):
        if name.startswith("_"):
            continue
        raw = None
        for klass in torch.Tensor.__mro__:
            if name in klass.__dict__:
                raw = klass.__dict__[name]
                break
        if isinstance(raw, (property, types.GetSetDescriptorType, types.MemberDescriptorType)):
            props.add(name)
        elif callable(getattr(torch.Tensor, name, None)):
            methods.add(name)
    return methods, props


TENSOR_METHODS, TENSOR_PROPS = _tensor_names()
TENSOR_METHODS -= _NOT_TENSOR
TENSOR_PROPS -= _NOT_TENSOR


def _getattr(obj, name):
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001  (torch.classes and friends raise on unknown names)
        return None


def _resolve_module(path):
    """The torch module at dotted `path`, or None."""
    obj = None
    for i, part in enumerate(path.split(".")):
        if i == 0:
            if part != "torch":
                return None
            obj = torch
            continue
        nxt = _getattr(obj, part)
        if nxt is None:
            try:
                nxt = __import__(".".join(path.split(".")[: i + 1]), fromlist=["_"])
            except Exception:  # noqa: BLE001  (a module of another version, or one needing extras)
                return None
        obj = nxt
    return obj if isinstance(obj, types.ModuleType) else None


_chain_cache = {}


def resolve_chain(parts):
    """(namespace, name) for the dotted chain `parts` (starting with 'torch'),
    resolved to the first non-module object; None if torch lacks it or it is private."""
    key = tuple(parts)
    if key in _chain_cache:
        return _chain_cache[key]
    res = None
    obj, ns = torch, ["torch"]
    for part in parts[1:]:
        if part.startswith("_"):
            break
        nxt = _getattr(obj, part)
        if nxt is None and isinstance(obj, types.ModuleType):
            try:  # a submodule torch does not import eagerly (torch.utils.tensorboard, ...)
                nxt = __import__(".".join(ns + [part]), fromlist=["_"])
            except Exception:  # noqa: BLE001
                nxt = None
        if nxt is None:
            break
        if isinstance(nxt, types.ModuleType):
            obj = nxt
            ns.append(part)
            continue
        res = (".".join(ns), part)
        break
    _chain_cache[key] = res
    return res


class FileCounter(ast.NodeVisitor):
    def __init__(self):
        self.modules = {}  # local name -> dotted torch module path
        self.symbols = {}  # local name -> (namespace, name)
        self.other_modules = set()  # local names bound to non-torch modules (numpy, os, ...)
        self.counts = Counter()

    # ---- imports --------------------------------------------------------------------------------
    def visit_Import(self, node):
        for a in node.names:
            top = a.name.split(".")[0]
            if a.name == "torch" or a.name.startswith("torch."):
                if a.asname:
                    if _resolve_module(a.name) is not None:
                        self.modules[a.asname] = a.name
                else:
                    self.modules["torch"] = "torch"
            else:
                self.other_modules.add(a.asname or top)

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        if node.level or not (mod == "torch" or mod.startswith("torch.")):
            for a in node.names:
                self.other_modules.discard(a.asname or a.name)
            return
        base = _resolve_module(mod)
        if base is None:
            return
        for a in node.names:
            if a.name == "*":
                continue
            local = a.asname or a.name
            full = f"{mod}.{a.name}"
            sub = _getattr(base, a.name)
            if isinstance(sub, types.ModuleType) or (sub is None and _resolve_module(full) is not None):
                self.modules[local] = full
            else:
                r = resolve_chain(full.split("."))
                if r is not None:
                    self.symbols[local] = r

    # ---- uses -----------------------------------------------------------------------------------
    def _chain(self, node):
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(node.id)
            return parts[::-1]
        return None

    def visit_Attribute(self, node):
        chain = self._chain(node)
        if chain is not None and chain[0] in self.modules:
            full = self.modules[chain[0]].split(".") + chain[1:]
            r = resolve_chain(full)
            if r is not None:
                self.counts[r] += 1
            return  # the inner attributes belong to this chain
        self.generic_visit(node)

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.symbols:
            self.counts[self.symbols[node.id]] += 1

    def _receiver_ok(self, value):
        if isinstance(value, ast.Constant) or isinstance(value, (ast.JoinedStr, ast.List, ast.Dict, ast.Set)):
            return False
        if isinstance(value, ast.Name):
            return value.id not in _SKIP_RECEIVERS and value.id not in self.modules and \
                value.id not in self.other_modules
        if isinstance(value, ast.Call):
            if isinstance(value.func, ast.Name) and value.func.id == "super":
                return False
            made_by = self._chain(value.func)  # np.zeros(3).sum(): a numpy array's method
            if made_by is not None and made_by[0] in self.other_modules:
                return False
        chain = self._chain(value)
        if chain is not None and (chain[0] in self.modules or chain[0] in self.other_modules):
            # numpy.random.x, os.path.x; torch.cuda.amp.x is a chain, counted above
            return False
        return True

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in TENSOR_METHODS and self._receiver_ok(f.value) and \
                not _str_split(f.attr, node):
            self.counts[("Tensor", f.attr)] += 1
            self.visit(f.value)
            for a in node.args:
                self.visit(a)
            for k in node.keywords:
                self.visit(k.value)
            return
        self.generic_visit(node)


def _str_split(attr, call):
    if attr != "split":
        return False
    if not call.args and not call.keywords:
        return True
    first = call.args[0] if call.args else None
    return isinstance(first, (ast.Constant, ast.JoinedStr)) and isinstance(getattr(first, "value", ""), str)


class _PropVisitor(ast.NodeVisitor):
    """Tensor property reads: `<expr>.shape` not called. Runs after FileCounter has bound aliases."""

    def __init__(self, fc):
        self.fc = fc
        self.called = set()

    def visit_Call(self, node):
        if isinstance(node.func, ast.Attribute):
            self.called.add(id(node.func))
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if id(node) not in self.called and node.attr in TENSOR_PROPS and self.fc._receiver_ok(node.value):
            self.fc.counts[("Tensor", node.attr)] += 1
        self.generic_visit(node)


def count_source(src):
    tree = ast.parse(src)
    fc = FileCounter()
    # Aliases first (imports inside functions included), then uses.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            fc.visit_Import(node)
        elif isinstance(node, ast.ImportFrom):
            fc.visit_ImportFrom(node)
    if not fc.modules and not fc.symbols:
        return Counter()  # a file that does not use torch
    for node in tree.body:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            fc.visit(node)
    pv = _PropVisitor(fc)
    pv.visit(tree)
    return fc.counts


def notebook_source(text):
    nb = json.loads(text)
    cells = nb.get("cells") or [c for ws in nb.get("worksheets", []) for c in ws.get("cells", [])]
    lines = []
    for c in cells:
        if c.get("cell_type") != "code":
            continue
        src = c.get("source") or c.get("input") or []
        src = "".join(src) if isinstance(src, list) else src
        # IPython magics and shell escapes are not Python.
        lines.extend(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!", "?")))
        lines.append("")
    return "\n".join(lines)


def project_files(path, rev="HEAD"):
    """(commit or None, [(relpath, text)]) for a git directory or a folder."""
    is_git = os.path.exists(os.path.join(path, "HEAD")) and os.path.isdir(os.path.join(path, "objects"))
    if not is_git:
        out = []
        for root, _, files in os.walk(path):
            for f in files:
                if f.endswith((".py", ".ipynb")):
                    p = os.path.join(root, f)
                    with open(p, encoding="utf-8-sig", errors="replace") as fh:
                        out.append((os.path.relpath(p, path), fh.read()))
        return None, out
    git = ["git", "--git-dir", path]
    commit = subprocess.run(git + ["rev-parse", rev], capture_output=True, text=True, check=True).stdout.strip()
    listing = subprocess.run(git + ["ls-tree", "-r", "-z", commit], capture_output=True, check=True).stdout
    entries = []
    for rec in listing.split(b"\0"):
        if not rec:
            continue
        meta, name = rec.split(b"\t", 1)
        mode, kind, sha = meta.split()
        name = name.decode("utf-8", "replace")
        if kind == b"blob" and name.endswith((".py", ".ipynb")):
            entries.append((name, sha.decode()))
    if not entries:
        return commit, []
    proc = subprocess.run(git + ["cat-file", "--batch"], input="".join(s + "\n" for _, s in entries).encode(),
                          capture_output=True, check=True)
    data, pos, out = proc.stdout, 0, []
    for name, _ in entries:
        header_end = data.index(b"\n", pos)
        header = data[pos:header_end].split()
        if header[-1] == b"missing":  # a blob the snapshot left out (large files)
            pos = header_end + 1
            continue
        size = int(header[2])
        body = data[header_end + 1: header_end + 1 + size]
        pos = header_end + 1 + size + 1
        out.append((name, body.decode("utf-8-sig", "replace")))
    return commit, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("projects", nargs="*", help="OWNER/NAME=PATH[@REV] (git directory or folder)")
    ap.add_argument("--mirrors", help="a folder of OWNER+NAME/repo git directories, each one a project")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "torch_api_usage.json"))
    ap.add_argument("--names-out", default=os.path.join(os.path.dirname(__file__), "..", "..", "python", "strata",
                                                        "_torch_names.json"),
                    help="where to write torch's public names per namespace (strata/_missing.py reads it)")
    args = ap.parse_args()

    uses = Counter()
    projects_using = defaultdict(set)
    project_rows = []
    specs = list(args.projects)
    if args.mirrors:
        given = {s.split("=", 1)[0] for s in specs}
        for d in sorted(os.listdir(args.mirrors)):
            repo = d.replace("+", "/", 1)
            if repo not in given and os.path.isdir(os.path.join(args.mirrors, d, "repo")):
                specs.append(f"{repo}={os.path.join(args.mirrors, d, 'repo')}")
    for spec in specs:
        repo, path = spec.split("=", 1)
        rev = "HEAD"
        if "@" in os.path.basename(path):
            path, rev = path.rsplit("@", 1)
        commit, files = project_files(path, rev)
        counts, parsed, failed = Counter(), 0, 0
        for name, text in files:
            try:
                src = notebook_source(text) if name.endswith(".ipynb") else text
                counts.update(count_source(src))
                parsed += 1
            except (SyntaxError, ValueError, RecursionError, json.JSONDecodeError):
                failed += 1
        for key, n in counts.items():
            uses[key] += n
            projects_using[key].add(repo)
        project_rows.append({"repo": repo, "commit": commit, "files_parsed": parsed, "files_skipped": failed,
                             "names_used": len(counts)})
        print(f"{repo:55s} {parsed:5d} files ({failed} skipped), {len(counts):4d} names", file=sys.stderr)

    rows = []
    for (ns, name), n in uses.items():
        full = "Tensor." + name if ns == "Tensor" else f"{ns}.{name}"
        rows.append({"name": full, "kind": ns, "projects": len(projects_using[(ns, name)]), "uses": n})
    rows.sort(key=lambda r: (-r["projects"], -r["uses"], r["name"]))
    result = {
        "description": "torch API names used by public PyTorch projects: for each name, the number of projects "
                       "using it and its total number of uses (bench/api_usage/extract.py). Names only, no code.",
        "torch_version": torch.__version__,
        "projects": project_rows,
        "names": rows,
    }
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
        fh.write("\n")
    print(f"{len(rows)} names from {len(project_rows)} projects -> {args.out}", file=sys.stderr)
    write_torch_names(args.names_out, {r["kind"] for r in rows if r["kind"] != "Tensor"})


# The namespaces whose Strata modules turn a miss into "not implemented yet"
# (strata/_missing.py): these, and every namespace the usage list names.
# torch's public names there, so that a name torch has gets
# NotImplementedError and any other name a plain AttributeError.
NAMED_NAMESPACES = ["torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.utils", "torch.optim",
                    "torch.optim.lr_scheduler", "torch.autograd", "torch.utils", "torch.utils.data", "torch.cuda",
                    "torch.backends", "torch.jit", "torch.amp", "torch.linalg", "torch.fft", "torch.special"]


def write_torch_names(path, used_namespaces=()):
    names = {}
    for ns in sorted(set(NAMED_NAMESPACES) | set(used_namespaces)):
        mod = _resolve_module(ns)
        if mod is not None:
            names[ns] = sorted(n for n in dir(mod) if not n.startswith("_"))
    names["torch.Tensor"] = sorted(n for n in dir(torch.Tensor) if not n.startswith("_"))
    with open(path, "w") as fh:
        json.dump({"torch_version": torch.__version__, "names": names}, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"torch's public names in {len(names)} namespaces -> {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
