"""The two sandboxed programs that grade a function problem, kept apart so a program cannot grade itself.

* The **runner** holds the program under test and nothing of the tests: it reads the calls to make
  (argument lists encoded by :mod:`mas_envs.value_wire`) from stdin, calls the entry point once per
  call under a time limit, and prints each result as plain data -- a value that is not plain data
  (a subclass, an object with its own ``__eq__``) is reported as such, never passed on.
* The **judge** holds the tests and nothing of the program: ``candidate`` is a stand-in that answers
  every call with the runner's recorded result, rebuilt from the encoding as a real builtin value.
  The asserts, the checking helpers and the builtins they use therefore run where the program never
  ran. A call the judge has no result for yet is reported as *needed*; the grader runs it and judges
  again (see :mod:`mas_envs.code_grading`).

Both print tagged JSON lines framed by a secret that arrives on stdin; the grader reads nothing else.
Whatever a runner prints only ever claims return values, which the judge then checks.
"""

from __future__ import annotations

import inspect

from mas_envs import value_wire

_WIRE = inspect.getsource(value_wire)

# The stdin of both programs: the secret on the first line, then one JSON object.
_PRELUDE = r'''
import sys as _s, json as _j, signal as _g
_secret, _nl, _payload = _s.stdin.read().partition("\n")
_job = _j.loads(_payload)
_LIMIT = float(_job["limit"])
class _MasTimeout(BaseException):
    pass
def _mas_alarm(*_):
    raise _MasTimeout()
_g.signal(_g.SIGALRM, _mas_alarm)
_out = _s.stdout
_dumps = _j.dumps
class _Sink:
    def write(self, s):
        return len(s)
    def flush(self):
        pass
    def isatty(self):
        return False
_s.stdout = _Sink()
def _emit(*fields):
    _out.write(_secret + " " + _dumps(list(fields)) + "\n")
    _out.flush()
def _limited(fn):
    _g.setitimer(_g.ITIMER_REAL, _LIMIT)
    try:
        return fn()
    finally:
        _g.setitimer(_g.ITIMER_REAL, 0)
'''

_RUNNER_BODY = r'''
_ns = {"__name__": "__mas_solution__", "__builtins__": __builtins__}
if _CONTEXT:
    try:
        _limited(lambda: exec(compile(_CONTEXT, "<context>", "exec"), _ns))
    except BaseException:
        pass
try:
    _limited(lambda: exec(compile(_PROGRAM, "<solution>", "exec"), _ns))
except BaseException as e:
    if isinstance(e, _MasTimeout):
        _emit("load", "timeout", "took longer than %gs" % _LIMIT)
    else:
        _emit("load", "error", "%s: %s" % (type(e).__name__, str(e)[:200]))
    _s.exit(0)
_cand = None
_sol = _ns.get("Solution")
if _ENTRY and isinstance(_sol, type) and hasattr(_sol, _ENTRY):
    try:
        _cand = getattr(_sol(), _ENTRY)
    except BaseException:
        _cand = None
if _cand is None and _ENTRY:
    _cand = _ns.get(_ENTRY)
_emit("load", "ok", "" if callable(_cand) else "name %r is not defined" % _ENTRY)
_timeouts = int(_job["prior_timeouts"])
_keys = _job["keys"]
for _i in range(int(_job["start"]), len(_keys)):
    if _timeouts >= _MAX_TIMEOUTS:
        break
    try:
        _args, _kwargs = call_of_key(_keys[_i])
    except WireError as e:
        _emit(_i, "bad", str(e))
        continue
    if not callable(_cand):
        _emit(_i, "raise", "NameError", "name %r is not defined" % _ENTRY)
        continue
    try:
        _value = _limited(lambda: _cand(*_args, **_kwargs))
        _emit(_i, "ok", _limited(lambda: encode(_value)))
    except _MasTimeout:
        _timeouts += 1
        _emit(_i, "timeout", "took longer than %gs" % _LIMIT)
    except WireError as e:
        _emit(_i, "bad", str(e))
    except BaseException as e:
        try:
            _detail = _limited(lambda: str(e)[:200])
        except BaseException:
            _detail = ""
        _emit(_i, "raise", type(e).__name__[:60], _detail)
_emit("done")
'''

_JUDGE_BODY = r'''
import ast as _ast, builtins as _b, random as _random
# Exceptions a test may catch by name; anything else the program raised becomes _CandidateError.
_PASSED_ON = {n: getattr(_b, n) for n in (
    "ValueError", "TypeError", "KeyError", "IndexError", "ZeroDivisionError", "AttributeError",
    "ArithmeticError", "OverflowError", "LookupError", "NotImplementedError", "RecursionError",
    "AssertionError", "NameError", "UnicodeError", "RuntimeError", "MemoryError")}
class _CandidateError(Exception):
    pass
class _CandidateDied(BaseException):
    pass
class _NotRun(BaseException):
    pass
class _NeedCall(BaseException):
    pass
class _Anything:
    """Discovery's stand-in result: absorbs every operation, so a test runs on to its later calls."""
    def __getattr__(self, name):
        return self
    def __call__(self, *a, **k):
        return self
    def __eq__(self, other):
        return True
    __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __contains__ = __eq__
    def __bool__(self):
        return True
    def __hash__(self):
        return 0
    def __iter__(self):
        return iter(())
    def __len__(self):
        return 0
    def __float__(self):
        return 0.0
    def __int__(self):
        return 0
    __index__ = __int__
    def __str__(self):
        return ""
    def __getitem__(self, k):
        return self
    def __abs__(self):
        return self
    __neg__ = __pos__ = __abs__
    def _op(self, *a):
        return self
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _op
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __round__ = _op
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _op
class _Lenient(_ast.NodeTransformer):
    """Discovery runs ``assert x`` as ``try: x except Exception: pass``, so a loop of asserts runs to the end."""
    def visit_Assert(self, node):
        handler = _ast.ExceptHandler(type=_ast.Name("Exception", _ast.Load()), name=None, body=[_ast.Pass()])
        return _ast.copy_location(_ast.Try(body=[_ast.Expr(node.test)], handlers=[handler], orelse=[], finalbody=[]), node)
def _compile_step(src, discovering):
    if not discovering:
        return compile(src, "<test>", "exec")
    return compile(_ast.fix_missing_locations(_Lenient().visit(_ast.parse(src))), "<test>", "exec")
def _stand_in(results, needed, flags, discovering):
    def candidate(*args, **kwargs):
        try:
            key = call_key(args, kwargs)
        except WireError as e:
            raise _CandidateError("an argument cannot be passed to the program: %s" % e) from None
        r = results.get(key)
        if r is None:
            if key not in needed:
                needed.append(key)
            if discovering:
                return _Anything()
            flags["needed"] = True
            raise _NeedCall()
        kind = r[0]
        if kind == "ok":
            try:
                return decode(r[1])
            except WireError as e:
                raise _CandidateError(str(e)) from None
        if kind == "raise":
            cls = _PASSED_ON.get(r[1], _CandidateError)
            raise cls(r[2] if cls is not _CandidateError else "%s: %s" % (r[1], r[2]))
        if kind == "timeout":
            raise _MasTimeout()
        if kind == "crash":
            raise _CandidateDied(r[1])
        if kind == "skipped":
            raise _NotRun(r[1])
        raise _CandidateError("the program returned %s" % (r[1] if len(r) > 1 else "no usable value"))
    return candidate
def _why(e):
    if isinstance(e, _MasTimeout):
        return "timeout", "took longer than %gs" % _LIMIT
    if isinstance(e, _CandidateDied):
        return "crash", str(e)
    if isinstance(e, _NotRun):
        return "not run", str(e)
    try:
        return "error", _limited(lambda: "%s: %s" % (type(e).__name__, e))
    except BaseException:
        return "error", type(e).__name__
def _judge(p, results, start, discovering):
    needed, flags = [], {"needed": False}
    _random.seed(0)  # tests that draw random inputs draw the same ones in every judge run
    _t = {"__name__": "__mas_tests__", "__builtins__": _b}
    if _CONTEXT:
        try:
            _limited(lambda: exec(compile(_CONTEXT, "<context>", "exec"), _t))
        except BaseException:
            pass
    cand = _stand_in(results, needed, flags, discovering)
    _t["candidate"] = cand
    if _ENTRY:
        _t[_ENTRY] = cand
    k, timeouts, setup_needs = -1, 0, []
    for src, is_test, probe in _STEPS:
        if is_test:
            k += 1
            if k < start:
                continue
        try:
            code = _compile_step(src, discovering)
        except BaseException as e:
            if is_test:
                _emit(p, k, "error", "SyntaxError: %s" % e, [])
            continue
        if timeouts >= _MAX_TIMEOUTS:
            if is_test:
                _emit(p, k, "not run", "skipped after repeated timeouts", [])
            continue
        flags["needed"] = False
        before = len(needed)
        try:
            _limited(lambda: exec(code, _t))
            status, detail = "pass", ""
        except AssertionError:
            status, detail = "fail", ""
            if probe is not None and not flags["needed"]:
                try:
                    detail = _limited(lambda: "expected %s but got %s" % (probe[1][:120], repr(eval(probe[0], _t))[:150]))
                except BaseException as e2:
                    detail = "%s raised %s" % (probe[0][:120], _why(e2)[1])
            detail = detail or "assertion failed"
        except BaseException as e:
            status, detail = _why(e)
            if status == "timeout":
                timeouts += 1
        if flags["needed"] and not is_test:
            setup_needs += needed[before:]  # the tests after this setup step need its result
        if flags["needed"] or setup_needs:
            status, detail = "need", ""
        if is_test:
            _emit(p, k, status, detail[:300], setup_needs + needed[before:])
    _emit(p, "done")
for _p, _program in enumerate(_job["programs"]):
    if _p < int(_job["start_program"]):
        continue
    _judge(_p, _program["results"], int(_job["start_test"]) if _p == int(_job["start_program"]) else 0,
           bool(_job["discovering"]))
_emit("done")
'''


def runner_source(program: str, context: str, entry_point: str | None, max_timeouts: int) -> str:
    """The runner for one program (the calls, the limit and the secret come on stdin)."""
    header = f"_PROGRAM = {program!r}\n_CONTEXT = {context!r}\n_ENTRY = {entry_point!r}\n_MAX_TIMEOUTS = {int(max_timeouts)}\n"
    return header + _WIRE + _PRELUDE + _RUNNER_BODY


def judge_source(steps: list, context: str, entry_point: str | None, max_timeouts: int) -> str:
    """The judge of one test suite; ``steps`` are ``(source, is_test, probe)`` triples."""
    header = f"_STEPS = {steps!r}\n_CONTEXT = {context!r}\n_ENTRY = {entry_point!r}\n_MAX_TIMEOUTS = {int(max_timeouts)}\n"
    return header + _WIRE + _PRELUDE + _JUDGE_BODY
