"""Read a tester's Python test code the way models write it, as top-level test statements.

The tester's answer format is "every top-level ``assert`` is one test". Small instruct models mostly
write something else that means the same: asserts inside ``def test_...():`` functions (called at the
end or not), ``unittest.TestCase`` classes with ``self.assertEqual(...)``, a copy of the function under
test before the tests, a ``if __name__ == "__main__": unittest.main()`` tail, and replies cut short
by the token budget. :func:`tester_statements` turns such code into the statements the format means:

* a reply cut mid-statement keeps its complete statements (trailing lines dropped until it parses);
* the body of every ``test*`` function, and of every ``test*`` method of a ``TestCase`` class, is lifted
  to the top level (in order), with ``self.assertX(...)`` calls rewritten as the equivalent ``assert``;
  calls of the lifted functions and statements that still need ``self`` are dropped;
* a definition or assignment of the function under test (or of ``candidate``) is dropped: the tests
  must exercise the coder's code, not the tester's own copy;
* ``if __name__ == "__main__":`` blocks are dropped (they start test runners, not tests).

Nothing here runs the code: it is only parsed and rewritten; it still runs in the sandbox only.
"""

from __future__ import annotations

import ast

# self.assertX(a, b) -> assert <a OP b>
_COMPARISONS = {
    "assertEqual": ast.Eq, "assertEquals": ast.Eq, "assertNotEqual": ast.NotEq, "assertIn": ast.In,
    "assertNotIn": ast.NotIn, "assertIs": ast.Is, "assertIsNot": ast.IsNot, "assertGreater": ast.Gt,
    "assertGreaterEqual": ast.GtE, "assertLess": ast.Lt, "assertLessEqual": ast.LtE,
    "assertListEqual": ast.Eq, "assertTupleEqual": ast.Eq, "assertDictEqual": ast.Eq, "assertSetEqual": ast.Eq,
    "assertCountEqual": None,  # sorted(a) == sorted(b), built below
}
MAX_TRAILING_CUTS = 80  # lines dropped at most when looking for the last complete statement


def tester_statements(code: str, protected: set[str]) -> list[ast.stmt]:
    """The top-level statements ``code`` means as tests; raises ``SyntaxError`` if no prefix of it parses.

    ``protected`` names must not be (re)defined by the tests: the function under test and ``candidate``.
    """
    tree = _parse_complete_prefix(code)
    lifted: set[str] = set()
    body: list[ast.stmt] = []
    for stmt in tree.body:
        body.extend(_top_level(stmt, protected, lifted))
    return [s for s in body if not _calls_one_of(s, lifted)]


def _parse_complete_prefix(code: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as first_error:
        lines = code.splitlines()
        for cut in range(len(lines) - 1, max(0, len(lines) - 1 - MAX_TRAILING_CUTS), -1):
            try:
                tree = ast.parse("\n".join(lines[:cut]))
            except SyntaxError:
                continue
            if tree.body:
                return tree
        raise first_error


def _top_level(stmt: ast.stmt, protected: set[str], lifted: set[str]) -> list[ast.stmt]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if stmt.name in protected:
            return []
        if stmt.name.startswith("test") and not stmt.args.args:
            lifted.add(stmt.name)
            return [s for inner in stmt.body for s in _top_level(inner, protected, lifted)]
        return [stmt]
    if isinstance(stmt, ast.ClassDef):
        if stmt.name in protected:
            return []
        if _is_test_case(stmt):
            lifted.add(stmt.name)
            out: list[ast.stmt] = []
            for member in stmt.body:
                if isinstance(member, ast.FunctionDef) and member.name.startswith("test"):
                    out += [s for inner in member.body if (s := _without_self(inner)) is not None]
            return out
        return [stmt]
    if _is_main_guard(stmt) or _assigns_one_of(stmt, protected):
        return []
    return [stmt]


def _is_test_case(cls: ast.ClassDef) -> bool:
    return any((isinstance(b, ast.Attribute) and b.attr == "TestCase") or (isinstance(b, ast.Name) and b.id == "TestCase")
               for b in cls.bases)


def _is_main_guard(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and "__name__" in {n.id for n in ast.walk(stmt.test) if isinstance(n, ast.Name)}


def _assigns_one_of(stmt: ast.stmt, names: set[str]) -> bool:
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return any((alias.asname or alias.name.split(".")[0]) in names for alias in stmt.names)
    return any(isinstance(n, ast.Name) and n.id in names for t in targets for n in ast.walk(t))


def _calls_one_of(stmt: ast.stmt, names: set[str]) -> bool:
    """``test_x()`` or ``TestX().test_y()`` left behind after the definitions were lifted."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and any(
        isinstance(n, ast.Name) and n.id in names for n in ast.walk(stmt.value.func))


def _without_self(stmt: ast.stmt) -> ast.stmt | None:
    """``stmt`` with ``self.assertX(...)`` calls rewritten as asserts; None if it still needs ``self``."""
    stmt = _SelfAsserts().visit(stmt)
    if any(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(stmt)):
        return None
    return ast.fix_missing_locations(stmt)


class _SelfAsserts(ast.NodeTransformer):
    def visit_Expr(self, node: ast.Expr) -> ast.stmt:
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"):
            return self.generic_visit(node)
        test = _assert_test(call.func.attr, call.args)
        return ast.copy_location(ast.Assert(test=test), node) if test is not None else node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        return node  # nested helpers keep their own code


def _assert_test(method: str, args: list[ast.expr]) -> ast.expr | None:
    if method == "assertTrue" and args:
        return args[0]
    if method == "assertFalse" and args:
        return ast.UnaryOp(op=ast.Not(), operand=args[0])
    if method == "assertIsNone" and args:
        return ast.Compare(left=args[0], ops=[ast.Is()], comparators=[ast.Constant(None)])
    if method == "assertIsNotNone" and args:
        return ast.Compare(left=args[0], ops=[ast.IsNot()], comparators=[ast.Constant(None)])
    if method == "assertAlmostEqual" and len(args) >= 2:
        difference = ast.Call(func=ast.Name("abs", ast.Load()), args=[ast.BinOp(args[0], ast.Sub(), args[1])],
                              keywords=[])
        return ast.Compare(left=difference, ops=[ast.Lt()], comparators=[ast.Constant(1e-7)])
    if method in _COMPARISONS and len(args) >= 2:
        op = _COMPARISONS[method]
        if op is None:
            left, right = (ast.Call(func=ast.Name("sorted", ast.Load()), args=[a], keywords=[]) for a in args[:2])
            return ast.Compare(left=left, ops=[ast.Eq()], comparators=[right])
        return ast.Compare(left=args[0], ops=[op()], comparators=[args[1]])
    return None
