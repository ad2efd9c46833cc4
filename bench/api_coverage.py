"""How much of the torch API that real projects use does Strata have?

    .venv/bin/python bench/api_coverage.py [--min-projects N] [--missing 40] [--json]

Reads bench/api_usage/torch_api_usage.json (names, with the number of public
projects using each and its total number of uses; built by
bench/api_usage/extract.py) and looks each name up in Strata: `torch.a.b.X` as
attribute X of module strata.a.b, `Tensor.x` as an attribute of strata.Tensor.
A name counts as present when the lookup succeeds; placeholders that raise
"not implemented yet" (strata/_missing.py) count as missing.

Prints coverage by name, weighted by projects and weighted by uses, overall
and per namespace, then the missing names, heaviest first (projects, then
uses). `--json` prints the same as one JSON object. Always exits 0: this is a
report, the targets are judged elsewhere.
"""

import argparse
import importlib
import json
import os
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

USAGE = os.path.join(HERE, "api_usage", "torch_api_usage.json")


def load_usage(path=USAGE):
    with open(path) as fh:
        return json.load(fh)


def strata_module(torch_namespace):
    """The Strata module for a torch namespace ("torch.nn" -> strata.nn), or None."""
    name = "strata" + torch_namespace[len("torch"):]
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def has_name(row, modules):
    import strata

    if row["kind"] == "Tensor":
        return _present(strata.Tensor, row["name"].split(".", 1)[1])
    ns = row["kind"]
    if ns not in modules:
        modules[ns] = strata_module(ns)
    mod = modules[ns]
    return mod is not None and _present(mod, row["name"][len(ns) + 1:])


def _present(obj, attr):
    try:
        getattr(obj, attr)
        return True
    except AttributeError:  # includes NotImplementedAttributeError
        return False


def coverage(data, min_projects=1):
    rows = [r for r in data["names"] if r["projects"] >= min_projects]
    modules = {}
    per_ns = defaultdict(lambda: {"names": 0, "have": 0, "projects": 0, "have_projects": 0, "uses": 0,
                                  "have_uses": 0})
    missing = []
    for r in rows:
        ok = has_name(r, modules)
        for key in ("(all)", r["kind"]):
            s = per_ns[key]
            s["names"] += 1
            s["projects"] += r["projects"]
            s["uses"] += r["uses"]
            if ok:
                s["have"] += 1
                s["have_projects"] += r["projects"]
                s["have_uses"] += r["uses"]
        if not ok:
            missing.append(r)
    missing.sort(key=lambda r: (-r["projects"], -r["uses"], r["name"]))

    def pct(a, b):
        return round(100.0 * a / b, 1) if b else 100.0

    table = []
    for ns, s in per_ns.items():
        table.append({"namespace": ns, "names": s["names"], "present": s["have"],
                      "by_name": pct(s["have"], s["names"]), "by_projects": pct(s["have_projects"], s["projects"]),
                      "by_uses": pct(s["have_uses"], s["uses"]), "weight_uses": s["uses"]})
    table.sort(key=lambda t: (t["namespace"] != "(all)", -t["weight_uses"]))
    return {"source": os.path.relpath(USAGE, os.path.join(HERE, "..")), "projects": len(data["projects"]),
            "min_projects": min_projects, "namespaces": table, "missing": missing}


def print_report(rep, n_missing, n_namespaces):
    print(f"torch API names used by {rep['projects']} public projects (used by >= {rep['min_projects']} of them), "
          f"found in Strata:\n")
    print(f"{'namespace':32s} {'names':>6s} {'present':>8s} {'by name':>8s} {'by projects':>12s} {'by uses':>8s}")
    rows = rep["namespaces"]
    shown, rest = rows[: n_namespaces + 1], rows[n_namespaces + 1:]
    for t in shown:
        print(f"{t['namespace']:32s} {t['names']:6d} {t['present']:8d} {t['by_name']:7.1f}% {t['by_projects']:11.1f}% "
              f"{t['by_uses']:7.1f}%")
    if rest:
        print(f"{'(' + str(len(rest)) + ' more namespaces)':32s} {sum(t['names'] for t in rest):6d} "
              f"{sum(t['present'] for t in rest):8d}")
    miss = rep["missing"]
    print(f"\n{len(miss)} missing names, heaviest first (projects using it, total uses):")
    for r in miss[:n_missing]:
        print(f"  {r['name']:55s} {r['projects']:4d} {r['uses']:7d}")
    if len(miss) > n_missing:
        print(f"  ... and {len(miss) - n_missing} more (--missing N, or --json)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-projects", type=int, default=1, help="only names used by at least this many projects")
    ap.add_argument("--missing", type=int, default=40, help="how many missing names to print")
    ap.add_argument("--namespaces", type=int, default=25, help="how many namespaces to list")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args(argv)
    rep = coverage(load_usage(), args.min_projects)
    if args.json:
        json.dump(rep, sys.stdout, indent=1)
        print()
    else:
        print_report(rep, args.missing, args.namespaces)
    return 0


if __name__ == "__main__":
    sys.exit(main())
