"""Importing Ray lazily and joining (or starting) the cluster.

A local cluster is started bound to loopback only: Ray resolves ``127.0.0.1`` to the machine's
external address unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is set before Ray is imported
(``ray._private.ray_constants``), so this module sets it when it is the first to import Ray.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'stronger-mas[ray]'  (or: pip install 'ray==2.60.0')"
LOOPBACK = "127.0.0.1"


def import_ray(local_cluster: bool = True) -> Any:
    """The ``ray`` module; a clear error naming the install command when it is missing."""
    if local_cluster and "ray" not in sys.modules:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep a local cluster on loopback
    try:
        import ray
    except ImportError:
        raise ImportError(f"backend='ray' needs Ray, which is not installed; install it with: {INSTALL_HINT}") from None
    return ray


def connect(address: str | None = None, num_cpus: int | None = None) -> Any:
    """Join the cluster at ``address``, or start a local one on 127.0.0.1 (no dashboard); returns ``ray``.

    A cluster this process already joined (e.g. a test's) is reused as it is.
    """
    ray = import_ray(local_cluster=address is None)
    if ray.is_initialized():
        return ray
    # Actors import this project: make the code this driver runs importable for them too (a local
    # cluster shares the file system; a remote cluster needs the package installed on every node).
    runtime_env = {"env_vars": _forwarded_env()} if address is None else None
    if address is None:
        ray.init(num_cpus=num_cpus, include_dashboard=False, _node_ip_address=LOOPBACK,
                 runtime_env=runtime_env, configure_logging=False)
        node_ip = ray.util.get_node_ip_address()
        if node_ip != LOOPBACK:
            ray.shutdown()
            raise RuntimeError(
                f"the local Ray cluster came up on {node_ip}, not {LOOPBACK}: Ray was imported before "
                "mas_trainer.backends.ray could keep it on loopback; set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 "
                "before importing ray, or pass ray_address of a cluster you started"
            )
    else:
        ray.init(address=address, include_dashboard=False, configure_logging=False)
    logger.info("Ray cluster resources: %s", ray.cluster_resources())
    return ray


def _forwarded_env() -> dict[str, str]:
    """Environment for actors of a local cluster: this checkout first on the path, offline hub."""
    project_root = str(Path(__file__).resolve().parents[2])
    path = [project_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {"PYTHONPATH": os.pathsep.join(path)}
    for name in ("HF_HUB_OFFLINE", "HF_HUB_DISABLE_TELEMETRY", "TOKENIZERS_PARALLELISM", "STRONGER_MAS_CACHE"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env
