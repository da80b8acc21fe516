"""Checks a strategy found within a small state budget against the exact one.

  check_relaxed.py EXACT.json RELAXED.json:BUDGET...

EXACT.json was searched with the default budget and must say exact. Each
RELAXED.json was searched with a budget too small for the exact DP: its
lower bound is at most the exact optimum, its cost at least the optimum and
at most each baseline's, its DP stayed within the budget (--max-states),
and when it says exact its cost is the optimum.
"""
import json
import sys

EPS = 1e-9  # relative: the search sums costs rounded to picoseconds


def main():
    exact = json.load(open(sys.argv[1]))
    assert exact["exact"] is True, "the default budget must solve exactly"
    opt = exact["cost_s"]
    for arg in sys.argv[2:]:
        path, budget = arg.rsplit(":", 1)
        r = json.load(open(path))
        # The budget counts the entries held: equal tables once.
        held = r["stats"]["built_dp_states"]
        assert held <= int(budget), f"{path}: {held} DP states held, over the budget {budget}"
        tol = EPS * opt + 1e-12
        assert r["lower_bound_s"] <= opt + tol, \
            f"{path}: lower bound {r['lower_bound_s']} above the optimum {opt}"
        assert r["cost_s"] >= opt - tol, f"{path}: cost {r['cost_s']} below the optimum {opt}"
        for name, b in r["baselines"].items():
            assert r["cost_s"] <= b["cost_s"] + tol, \
                f"{path}: cost {r['cost_s']} worse than {name} ({b['cost_s']})"
        if r["exact"]:
            assert abs(r["cost_s"] - opt) <= tol, f"{path}: says exact, costs {r['cost_s']}"
        else:
            assert r["gap"] > 0 or r["cost_s"] == r["lower_bound_s"], f"{path}: gap {r['gap']}"
        print(f"{path}: exact={r['exact']} cost {r['cost_s']:.6e} bound "
              f"{r['lower_bound_s']:.6e} optimum {opt:.6e}")
    print("ok")


if __name__ == "__main__":
    main()
