"""Compute one env's eval-set fingerprint in a child process (so a costly or hanging env can be timed out).

Protocol: read ``{"name", "split", "kwargs"}`` as JSON on stdin, write ``{"fingerprint": hex}`` or
``{"error": text}`` as JSON on stdout. Imports only ``mas_envs``; the name is looked up in its registry.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    request = json.load(sys.stdin)
    try:
        from mas_envs import make_env

        env = make_env(request["name"], split=request["split"], **request["kwargs"])
        try:
            reply = {"fingerprint": str(env.unwrapped.eval_set_fingerprint())}
        finally:
            env.close()
    except Exception as exc:  # reported to the submitter as "the env rejects these kwargs"
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    json.dump(reply, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
