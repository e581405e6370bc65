"""``mas-leaderboard``: ``submit`` (validate + store), ``validate`` (check only), ``build`` (render the site)
and ``compare A B`` (paired comparison of two runs or aggregated rows on their shared tasks).

Exit codes: 0 done, 2 refused (each problem printed as ``path: reason``), 1 unexpected internal error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a plain script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from leaderboard import DEFAULT_ENTRIES_DIR, DEFAULT_SITE_DIR  # noqa: E402
from leaderboard.problems import SubmissionError  # noqa: E402

EXIT_OK, EXIT_INTERNAL, EXIT_REFUSED = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mas-leaderboard", description="Validate, store and render stronger-mas evaluation results.")
    sub = parser.add_subparsers(dest="command", required=True)
    submit = sub.add_parser("submit", help="validate a result file and store it as a leaderboard entry")
    submit.add_argument("results", type=Path, help="result JSON written by mas-eval")
    submit.add_argument("--entries", type=Path, default=DEFAULT_ENTRIES_DIR, help="entries folder (default: %(default)s)")
    check = sub.add_parser("validate", help="run every check on a result file without storing it")
    check.add_argument("results", type=Path)
    check.add_argument("--entries", type=Path, default=DEFAULT_ENTRIES_DIR, help="also report a duplicate of a stored entry")
    build = sub.add_parser("build", help="render index.html, success.png and leaderboard.md")
    build.add_argument("--entries", type=Path, default=DEFAULT_ENTRIES_DIR, help="entries folder (default: %(default)s)")
    build.add_argument("--out", type=Path, default=DEFAULT_SITE_DIR, help="output folder (default: %(default)s)")
    comp = sub.add_parser("compare", help="paired comparison of two entries or aggregated rows on their shared tasks")
    comp.add_argument("a", help="results file (path, or file name / run id in --entries) or an aggregated-row id")
    comp.add_argument("b", help="the same for the other side")
    comp.add_argument("--entries", type=Path, default=DEFAULT_ENTRIES_DIR, help="entries folder (default: %(default)s)")
    return parser


def _submit(args: argparse.Namespace, store: bool) -> int:
    from leaderboard.store import find_duplicate, store_entry
    from leaderboard.validate import validate_file

    try:
        result = validate_file(args.results)
        if store:
            path = store_entry(result, args.entries)
            print(f"accepted: stored {args.results} as {path}")
        else:
            duplicate = find_duplicate(result, args.entries)
            if duplicate is not None:
                print(f"valid, but already stored as {duplicate.name}")
            else:
                print(f"valid: {args.results}")
    except SubmissionError as exc:
        print(f"refused: {args.results}", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_OK


def _build(args: argparse.Namespace) -> int:
    from leaderboard.build import build_site

    output = build_site(args.entries, args.out)
    print(f"built {output.html} ({output.entries} entries in {output.rows} rows), {output.png}, {output.markdown}")
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from leaderboard.compare import CompareError, compare, report, resolve
    from leaderboard.rows import aggregate, load_rows

    groups = None
    try:
        sides = []
        for name in (args.a, args.b):
            if groups is None and not Path(name).is_file() and not (args.entries / name).is_file() \
                    and not (args.entries / f"{name}.json").is_file():
                groups = aggregate(load_rows(args.entries))
            sides.append(resolve(name, args.entries, groups))
        print(report(compare(*sides)))
    except CompareError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mas-leaderboard``; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            return _build(args)
        if args.command == "compare":
            return _compare(args)
        return _submit(args, store=args.command == "submit")
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug or an I/O failure: one line, not a traceback
        print(f"mas-leaderboard: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
