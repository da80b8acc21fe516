#!/usr/bin/env python3
"""Edge coverage of a fuzz harness's corpus, as a share of the code it reads.

  python3 tools/dev/fuzz_coverage.py NAME [--corpus DIR] [--under PATH ...] [--entered]

Runs build-fuzz/bin/fuzz-NAME over its corpus once (libFuzzer's -runs=0
-print_coverage=1: every instrumented function with the edges the corpus
covered and its total) and sums the edges per source file and per folder
of the repository, for the folders or files given (default: all), the
least covered first. Functions never entered count with all their edges,
unless --entered.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

LINE = re.compile(r"^(?:UN)?COVERED_FUNC: hits: (\d+) edges: (\d+)/(\d+) .* (\S+):\d+$")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name")
    parser.add_argument("--corpus")
    parser.add_argument("--under", nargs="*", default=[])
    parser.add_argument("--entered", action="store_true",
                        help="count only the functions the corpus entered "
                        "(a reader's own code, not the writers linked "
                        "beside it)")
    parser.add_argument("--files", type=int, default=15,
                        help="files to list (the least covered first)")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    binary = os.path.join(root, "build-fuzz", "bin", f"fuzz-{args.name}")
    corpus = args.corpus or os.path.join(root, "build-fuzz", "corpus",
                                         args.name)
    done = subprocess.run([binary, corpus, "-runs=0", "-print_coverage=1"],
                          capture_output=True, text=True)
    files = collections.defaultdict(lambda: [0, 0])
    for line in done.stderr.splitlines() + done.stdout.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        if args.entered and int(m.group(1)) == 0:
            continue
        path = os.path.relpath(m.group(4), root)
        if path.startswith("..") or path.startswith("build"):
            continue  # system headers and generated code
        if args.under and not any(path.startswith(u) for u in args.under):
            continue
        files[path][0] += int(m.group(2))
        files[path][1] += int(m.group(3))
    if not files:
        print(f"fuzz_coverage: no coverage read from {binary} "
              f"(exit {done.returncode})", file=sys.stderr)
        return 1
    folders = collections.defaultdict(lambda: [0, 0])
    for path, (hit, total) in files.items():
        folder = os.path.dirname(path)
        folders[folder][0] += hit
        folders[folder][1] += total
    hit = sum(h for h, _ in files.values())
    total = sum(t for _, t in files.values())
    print(f"fuzz-{args.name}: {hit} of {total} edges "
          f"({100.0 * hit / total:.1f}%) in {len(files)} files")
    for folder, (h, t) in sorted(folders.items()):
        print(f"  {folder + '/':40} {h:6} / {t:6}  {100.0 * h / t:5.1f}%")
    print("least covered files:")
    ranked = sorted(files.items(), key=lambda kv: kv[1][0] / kv[1][1])
    for path, (h, t) in ranked[:args.files]:
        print(f"  {path:48} {h:6} / {t:6}  {100.0 * h / t:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
