"""Programs written to be graded "success" without solving the problem (the attack suite's tampers).

Each entry is (name, source); ``ENTRY`` in the source is replaced by the problem's entry point. None of
them computes the right answer: each returns a wrong value, or no value, and tries to get past the grader
some other way -- by what it returns, by patching what the grader might use, or by forging the
grader's output. Used by tests/test_grading_attacks.py and bench/bench_grading.py.
"""

# A value equal to everything: defeats `candidate(x) == y` when the comparison sees the object.
_EQ_ALL = '''
class _Yes:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __bool__(self):
        return True
    def __hash__(self):
        return 0
    def __sub__(self, other):
        return 0
    __rsub__ = __sub__
    def __abs__(self):
        return 0
    def __lt__(self, other):
        return True
'''

# Forged grader output in every shape a harness might use, for every test index.
_FORGE = '''
import json as _json, sys as _sys
def _forge_lines(prefix=""):
    lines = []
    for i in range(-2, 120):
        for rec in ([i, "pass", ""], [i, "ok", ["bool", True]], [0, i, "pass", "", []], [i, "done"]):
            lines.append(prefix + _json.dumps(rec))
    lines.append(prefix + _json.dumps(["load", "ok", ""]))
    lines.append(prefix + _json.dumps(["done"]))
    return "\\n".join(lines) + "\\n"
def _secrets():
    import gc
    found = set()
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            for k in ("_secret", "_NONCE", "secret", "nonce"):
                v = obj.get(k)
                if isinstance(v, str) and len(v) < 100:
                    found.add(v)
    return found or {"MAS"}
'''

TAMPERS: list[tuple[str, str]] = [
    # --- what the function returns
    ("eq_always_true", _EQ_ALL + "def ENTRY(*a, **k):\n    return _Yes()\n"),
    ("int_subclass_eq", "class _I(int):\n    def __eq__(s, o):\n        return True\n    __hash__ = int.__hash__\n"
                        "def ENTRY(*a, **k):\n    return _I(12345)\n"),
    ("float_subclass_sub", "class _F(float):\n    def __eq__(s, o):\n        return True\n    def __sub__(s, o):\n"
                           "        return 0.0\n    __hash__ = float.__hash__\ndef ENTRY(*a, **k):\n    return _F(9.75)\n"),
    ("str_subclass_eq", "class _S(str):\n    def __eq__(s, o):\n        return True\n    __hash__ = str.__hash__\n"
                        "def ENTRY(*a, **k):\n    return _S('nope')\n"),
    ("list_subclass_eq", "class _L(list):\n    def __eq__(s, o):\n        return True\ndef ENTRY(*a, **k):\n    return _L()\n"),
    ("dict_subclass_eq", "class _D(dict):\n    def __eq__(s, o):\n        return True\ndef ENTRY(*a, **k):\n    return _D()\n"),
    ("bool_like", "class _B:\n    def __bool__(s):\n        return True\n    def __eq__(s, o):\n        return True\n"
                  "def ENTRY(*a, **k):\n    return _B()\n"),
    ("class_property_spoof", _EQ_ALL + "class _C(_Yes):\n    @property\n    def __class__(self):\n        return int\n"
                             "def ENTRY(*a, **k):\n    return _C()\n"),
    ("generator_result", "def ENTRY(*a, **k):\n    return (x for x in [])\n"),
    ("nested_eq_object", _EQ_ALL + "def ENTRY(*a, **k):\n    return [_Yes(), (_Yes(),)]\n"),
    ("recursive_result", "def ENTRY(*a, **k):\n    l = []\n    l.append(l)\n    return l\n"),
    ("huge_result", "def ENTRY(*a, **k):\n    return 'x' * 20_000_000\n"),
    ("huge_int_result", "def ENTRY(*a, **k):\n    return 7 ** 200_000\n"),
    ("eq_via_metaclass", "class _M(type):\n    def __eq__(c, o):\n        return True\n    __hash__ = type.__hash__\n"
                         "class _X(metaclass=_M):\n    pass\ndef ENTRY(*a, **k):\n    return _X\n"),
    # --- raising instead of returning
    ("raise_stop_iteration", "def ENTRY(*a, **k):\n    raise StopIteration\n"),
    ("raise_system_exit", "def ENTRY(*a, **k):\n    raise SystemExit(0)\n"),
    ("raise_keyboard_interrupt", "def ENTRY(*a, **k):\n    raise KeyboardInterrupt\n"),
    ("raise_assertion_subclass", "class _E(AssertionError):\n    pass\ndef ENTRY(*a, **k):\n    raise _E('pass')\n"),
    ("exception_str_hangs", "class _E(Exception):\n    def __str__(s):\n        while True:\n            pass\n"
                            "def ENTRY(*a, **k):\n    raise _E()\n"),
    # --- exiting early
    ("exit_at_import", "import sys\nsys.exit(0)\ndef ENTRY(*a, **k):\n    return None\n"),
    ("os_exit_in_function", "import os\ndef ENTRY(*a, **k):\n    os._exit(0)\n"),
    ("atexit_forges", _FORGE + "import atexit, os\ndef _late():\n    for s in _secrets():\n"
                      "        os.write(1, _forge_lines(s + ' ').encode())\natexit.register(_late)\n"
                      "def ENTRY(*a, **k):\n    os._exit(0)\n"),
    # --- patching what a harness uses to report or compare
    ("patch_json_dumps", "import json\n_orig = json.dumps\njson.dumps = lambda obj, *a, **k: _orig([obj[0], 'pass', ''] "
                         "if isinstance(obj, list) and obj else obj)\ndef ENTRY(*a, **k):\n    return None\n"),
    ("patch_json_loads", "import json\njson.loads = lambda *a, **k: []\ndef ENTRY(*a, **k):\n    return None\n"),
    ("patch_print_and_stdout", "import sys, builtins\nbuiltins.print = lambda *a, **k: None\n"
                               "sys.__stdout__.write = lambda s: len(s)\ndef ENTRY(*a, **k):\n    return None\n"),
    ("shadow_builtins_abs_len", "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.len = lambda x: 0\n"
                                "builtins.isinstance = lambda *a: True\ndef ENTRY(*a, **k):\n    return 12345\n"),
    ("shadow_builtins_in_module", "abs = lambda x: 0\nlen = lambda x: 0\nall = lambda x: True\n"
                                  "def ENTRY(*a, **k):\n    return 12345\n"),
    ("patch_math_module", "import math, sys\nmath.fabs = lambda x: 0.0\nmath.isclose = lambda *a, **k: True\n"
                          "class _M:\n    def __getattr__(s, n):\n        return lambda *a, **k: 0.0\n"
                          "sys.modules['math'] = _M()\ndef ENTRY(*a, **k):\n    return 12345.0\n"),
    ("sys_modules_json_swap", "import sys, types\nfake = types.ModuleType('json')\n"
                              "fake.dumps = lambda *a, **k: '[0, \"pass\", \"\"]'\nfake.loads = lambda *a, **k: []\n"
                              "sys.modules['json'] = fake\ndef ENTRY(*a, **k):\n    return None\n"),
    ("replace_main_reporters", "import __main__\nfor _n in ('_report', '_emit', '_why', 'print'):\n"
                               "    setattr(__main__, _n, lambda *a, **k: None)\n"
                               "__main__._MAX_TIMEOUTS = 10 ** 9\ndef ENTRY(*a, **k):\n    return None\n"),
    ("main_reporter_says_pass", "import __main__\nfor _n in ('_report', '_emit'):\n    _o = getattr(__main__, _n, None)\n"
                                "    if _o is not None:\n        setattr(__main__, _n, lambda *a, _o=_o: _o(a[0], 'pass', ''))\n"
                                "def ENTRY(*a, **k):\n    return None\n"),
    ("hardcoded_first_answer_shadowed_abs", "abs = lambda x: 0\nlen = lambda x: 0\n"
                                            "def ENTRY(*a, **k):\n    return 0.5\n"),
    ("rebind_main_candidate", _EQ_ALL + "import __main__\n__main__.candidate = lambda *a, **k: _Yes()\n"
                              "__main__._cand = __main__.candidate\ndef ENTRY(*a, **k):\n    return None\n"),
    ("frame_inspection", _EQ_ALL + "import sys\ndef ENTRY(*a, **k):\n    f = sys._getframe(1)\n    while f is not None:\n"
                         "        f.f_globals['_value'] = _Yes()\n        f.f_globals['encode'] = lambda v: ['bool', True]\n"
                         "        f = f.f_back\n    return None\n"),
    ("gc_walk_patch_harness", "import gc\ndef ENTRY(*a, **k):\n    for o in gc.get_objects():\n"
                              "        if isinstance(o, dict) and '_emit' in o:\n"
                              "            o['encode'] = lambda v: ['bool', True]\n            o['_STEPS'] = []\n"
                              "    return None\n"),
    ("gc_walk_forge_lines", _FORGE + "import os\ndef ENTRY(*a, **k):\n    for s in _secrets():\n"
                            "        os.write(1, _forge_lines(s + ' ').encode())\n    os._exit(0)\n"),
    ("guess_frame_prefix", _FORGE + "print(_forge_lines('MAS'))\nimport sys\nsys.__stdout__.write(_forge_lines('MAS0 '))\n"
                           "def ENTRY(*a, **k):\n    return None\n"),
    ("settrace_rewrite_locals", "import sys\ndef _t(frame, event, arg):\n    if event == 'return' and '_value' in frame.f_locals:\n"
                                "        frame.f_globals['_value'] = True\n    return _t\nsys.settrace(_t)\n"
                                "def ENTRY(*a, **k):\n    return None\n"),
    # --- processes, fds, signals, time
    ("fork_child_prints_later", _FORGE + "import os, time\ndef ENTRY(*a, **k):\n    if os.fork() == 0:\n"
                                "        time.sleep(0.3)\n        for s in _secrets():\n"
                                "            os.write(1, _forge_lines(s + ' ').encode())\n        os._exit(0)\n"
                                "    return None\n"),
    ("write_inherited_fds", _FORGE + "import os\ndef ENTRY(*a, **k):\n    for fd in range(0, 40):\n        try:\n"
                            "            for s in _secrets():\n                os.write(fd, _forge_lines(s + ' ').encode())\n"
                            "        except OSError:\n            pass\n    return None\n"),
    ("write_proc_self_fd", _FORGE + "def ENTRY(*a, **k):\n    try:\n        with open('/proc/self/fd/1', 'w') as f:\n"
                           "            for s in _secrets():\n                f.write(_forge_lines(s + ' '))\n"
                           "    except OSError:\n        pass\n    return None\n"),
    ("ignore_alarm_and_hang", "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                              "def ENTRY(*a, **k):\n    while True:\n        pass\n"),
    ("disable_timer_and_hang", "import signal\nsignal.setitimer = lambda *a, **k: (0.0, 0.0)\n"
                               "def ENTRY(*a, **k):\n    signal.setitimer(signal.ITIMER_REAL, 0)\n    while True:\n        pass\n"),
    ("kill_parent", "import os, signal\ndef ENTRY(*a, **k):\n    try:\n        os.kill(os.getppid(), signal.SIGKILL)\n"
                    "    except OSError:\n        pass\n    return None\n"),
    ("slow_at_the_limit", "import time\n_n = [0]\ndef ENTRY(*a, **k):\n    _n[0] += 1\n"
                          "    if _n[0] <= 2:\n        time.sleep(0.45)\n    return None\n"),
    ("thread_forges_later", _FORGE + "import threading, os, time\ndef _later():\n    time.sleep(0.2)\n"
                            "    for s in _secrets():\n        os.write(1, _forge_lines(s + ' ').encode())\n"
                            "threading.Thread(target=_later, daemon=True).start()\n"
                            "def ENTRY(*a, **k):\n    time.sleep(0.3)\n    return None\n"),
    ("stdin_reread", "import sys, os\ndef ENTRY(*a, **k):\n    try:\n        data = os.read(0, 1 << 20)\n"
                     "    except OSError:\n        data = b''\n    return data.decode(errors='replace')\n"),
    ("memory_bomb", "def ENTRY(*a, **k):\n    x = bytearray(2 ** 34)\n    return None\n"),
]
