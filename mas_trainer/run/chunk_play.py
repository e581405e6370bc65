"""Playing an evaluation's chunks of tasks: in this process, or spread over worker processes.

An evaluation plays tasks in chunks (:mod:`mas_trainer.run.eval_progress`). A chunk is independent of
every other: greedy play of a task does not depend on the chunk it is in, and sampled play seeds each
chunk with ``seed + start``. So chunks can be played by several processes at once.

Why processes: on a small CPU one generation process with two threads is slower than two processes with
one thread each (the decode step of a 0.5B model is too small to split well over threads), so
``mas-eval --workers 2`` on a 2-core machine plays about twice the tasks per hour. Each worker loads its
own copy of the weights (``workers`` x the memory) and uses ``threads`` torch threads. The parent process
keeps the only writer of the progress and transcripts files: a worker returns its chunk and transcripts
and the parent saves them, in the order they finish. The outcome of a task is the same whichever worker
plays it (a test checks this), as long as the thread count per process is the same.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

from mas_envs import make_env
from mas_trainer.policies.workers import make_backend
from mas_trainer.rollout.atgrpo import tree_rollout
from mas_trainer.run.eval_progress import Chunk
from mas_trainer.run.machine import machine_facts
from mas_trainer.run.transcripts import episode_transcripts


@dataclass(frozen=True)
class ChunkJob:
    """Everything that decides how a chunk of tasks is played, except the weights."""

    env: str
    env_kwargs: dict[str, Any]
    workflow: str
    split: str
    seed: int
    roles: tuple[str, ...]
    routing: dict[str, str]  # role -> policy name
    samples: int
    temperature: float
    top_p: float
    max_new_tokens: int | dict[str, int]  # one budget, or one per role
    backend: str
    key: str  # the evaluation's outcome key, written into the transcripts
    transcribe: bool = False


def make_eval_envs(env_name: str, kwargs: dict[str, Any], workflow: str, split: str, n: int, seed: int,
                   start: int = 0) -> list[Any]:
    """Fresh envs on tasks ``start..start+n-1`` of ``split`` (reset seed ``seed + i`` for task ``i``)."""
    envs = []
    for index in range(start, start + n):
        env = make_env(env_name, workflow=workflow, split=split, **kwargs)
        env.reset(seed=seed + index, options={"task_index": index})
        envs.append(env)
    return envs


def play(envs: list[Any], loaded: Any, routing: dict[str, str], *, samples: int, temperature: float,
         top_p: float, max_new_tokens: int | dict[str, int], seed: int, backend: str = "auto",
         episode_ids: list[int] | None = None, bar: Any = None):
    """Greedy / sampled / best-of-K episodes via the AT-GRPO tree rollout (``k = samples``).

    ``loaded`` is a :class:`mas_trainer.run.evaluate.LoadedPolicies`. ``episode_ids`` default to
    ``0..len(envs)-1`` (the task indices of :func:`make_eval_envs`). A ``bar`` (tqdm), if given, is
    advanced by the episodes this call finishes.
    """
    used = sorted(set(routing.values()))
    backends = {p: make_backend(*loaded.models[p], kind=backend) for p in used}
    offset = bar.n if bar is not None else 0

    steps = [0]
    first = episode_ids[0] if episode_ids else 0

    def on_step(finished: int, total: int) -> None:
        if bar is not None:  # a chunk's episodes finish together: say which agent step it is on meanwhile
            steps[0] += 1
            bar.set_postfix_str(f"tasks {first}-{first + total - 1}, agent step {steps[0]}", refresh=False)
            bar.update(offset + finished - bar.n)
            bar.refresh()

    rollout = tree_rollout(envs, backends=backends, tokenizers=loaded.tokenizers(), policy_of_role=routing.__getitem__,
                           k=samples, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                           episode_ids=episode_ids, seed=seed if temperature > 0 else None, on_step=on_step)
    if bar is not None:
        bar.update(offset + len(envs) - bar.n)
    return rollout


def chunk_of(rollout: Any, roles: list[str] | tuple[str, ...], wall_time_s: float, start: int, stop: int) -> Chunk:
    """The episode records of one played chunk and its per-role step counts (for ``evaluate.summarize``)."""
    tokens: dict[int, int] = {}
    for s in rollout.samples:
        tokens[s.info["episode"]] = tokens.get(s.info["episode"], 0) + len(s.completion_ids)
    episodes = [
        {
            "task_index": int(ep.episode_id),
            "task_id": str(ep.task_id),
            "success": bool(ep.success),
            "turns": int(ep.turns),
            "return": float(ep.episode_return),
            "tokens": int(tokens.get(ep.episode_id, 0)),
        }
        for ep in sorted(rollout.episodes, key=lambda ep: ep.episode_id)
    ]
    role_steps = {}
    for role in roles:
        steps = [s for ep in rollout.episodes for s in ep.steps if s.agent == role]
        role_steps[role] = [len(steps), float(sum(s.reward for s in steps)),
                            sum(s.parse_error is not None for s in steps)]
    return Chunk(start, stop, round(float(wall_time_s), 3), episodes, role_steps)


def play_chunk(job: ChunkJob, loaded: Any, start: int, stop: int,
               bar: Any = None) -> tuple[Chunk, list[dict[str, Any]]]:
    """Play tasks ``start..stop-1``; return the chunk (with the machine that played it) and its transcripts
    (empty unless ``job.transcribe``)."""
    envs = make_eval_envs(job.env, job.env_kwargs, job.workflow, job.split, stop - start, job.seed, start)
    began = time.perf_counter()
    rollout = play(envs, loaded, job.routing, samples=job.samples, temperature=job.temperature, top_p=job.top_p,
                   max_new_tokens=job.max_new_tokens, seed=job.seed + start, backend=job.backend,
                   episode_ids=list(range(start, stop)), bar=bar)
    chunk = chunk_of(rollout, job.roles, time.perf_counter() - began, start, stop)
    chunk.machine = machine_facts()
    lines = episode_transcripts(rollout, loaded.tokenizers(), job.key) if job.transcribe else []
    return chunk, lines


def play_chunks(job: ChunkJob, spans: list[tuple[int, int]], *, loaded: Any = None,
                load: Callable[[], Any] | None = None, workers: int = 1, threads: int = 1,
                bar: Any = None) -> Iterator[tuple[Chunk, list[dict[str, Any]]]]:
    """Yield ``(chunk, transcripts)`` for every span, as each finishes.

    With ``workers == 1`` the spans are played here, in order, with ``loaded``. With ``workers > 1``
    each of ``workers`` spawned processes calls ``load()`` (a picklable function returning the policies)
    once, sets ``threads`` torch threads, and plays spans as they come free; they finish out of order.
    A worker's error is raised here (the chunks yielded before it are the caller's to keep); on any exit
    the pending spans are cancelled and the workers stopped.
    """
    if workers <= 1:  # the caller sizes ``workers`` to the spans (evaluate: at most one per chunk to play)
        if loaded is None:
            loaded = load() if load is not None else None
        for start, stop in spans:
            yield play_chunk(job, loaded, start, stop, bar=bar)
        return
    if load is None:
        raise ValueError("play_chunks with workers > 1 needs load(), a picklable function that loads the policies")
    context = multiprocessing.get_context("spawn")  # no forked copies of torch's thread pools
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                                  initializer=_start_worker, initargs=(load, job, threads))
    finished = False
    try:
        pending = [pool.submit(_play_in_worker, start, stop) for start, stop in spans]
        for future in concurrent.futures.as_completed(pending):
            chunk, lines = future.result()
            if bar is not None:
                bar.update(chunk.stop - chunk.start)
            yield chunk, lines
        finished = True
    finally:
        if not finished:  # an error or an interrupt: do not wait for the chunks still being played
            for process in list(getattr(pool, "_processes", {}).values()):
                process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


# What a worker process holds: its policies (or the error loading them) and the job.
_WORKER: dict[str, Any] = {}


def _start_worker(load: Callable[[], Any], job: ChunkJob, threads: int) -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the parent's bar is the only one; no per-tensor loading bars
    torch.set_num_threads(max(1, int(threads)))
    _WORKER["job"] = job
    try:
        _WORKER["loaded"] = load()
    except Exception as err:  # reported by the first task: an initializer's error would only break the pool
        _WORKER["error"] = err


def _play_in_worker(start: int, stop: int) -> tuple[Chunk, list[dict[str, Any]]]:
    if "error" in _WORKER:
        raise _WORKER["error"]
    return play_chunk(_WORKER["job"], _WORKER["loaded"], start, stop)
