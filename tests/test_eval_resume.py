"""mas-eval in chunks: a stopped evaluation resumes from its progress file and gives the same results.

Real envs, the real tiny model, the real CLI; a "crash" is an exception raised from inside the second
chunk's play, after the first chunk was saved.
"""

from __future__ import annotations

import json

import pytest

from leaderboard.validate import result_problems

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ARGS = ["--env", "plan_path", "--model", "tiny", "--workflow", "mas", "--episodes", "5", "--max-new-tokens", "3",
        "--env-kwargs", '{"preset": "4x4", "max_turns": 2}', "--quiet"]


class Stopped(RuntimeError):
    """Stands for the process being stopped (KeyboardInterrupt would stop pytest itself)."""


def outcome(data: dict) -> tuple:
    """What must not depend on chunking or resuming: every episode and the per-role stats."""
    per_role = {r: (round(v["mean_reward"], 9), round(v["parse_error_rate"], 9))
                for r, v in data["summary"]["per_role"].items()}
    return data["episodes"], data["summary"]["success_rate"], per_role


@pytest.fixture
def stoppable_play(monkeypatch):
    """Records the task ids of every chunk played; while ``crash[0]`` is set, the second chunk raises."""
    from mas_trainer.run import chunk_play

    real_play, calls, crash = chunk_play.play, [], [True]

    def play(envs, *args, **kwargs):
        calls.append(kwargs["episode_ids"])
        if crash[0] and len(calls) == 2:
            raise Stopped("stopped in the second chunk")
        return real_play(envs, *args, **kwargs)

    monkeypatch.setattr(chunk_play, "play", play)
    return calls, crash


def test_chunks_give_the_results_of_one_batch(tmp_path):
    from mas_trainer.run.eval_cli import main

    one, chunked = tmp_path / "one.json", tmp_path / "chunked.json"
    assert main(ARGS + ["--chunk-size", "5", "--out", str(one)]) == 0
    assert main(ARGS + ["--chunk-size", "2", "--out", str(chunked)]) == 0
    a, b = json.loads(one.read_text()), json.loads(chunked.read_text())
    assert outcome(a) == outcome(b)
    assert [e["task_index"] for e in b["episodes"]] == [0, 1, 2, 3, 4]
    assert b["provenance"]["chunk_size"] == 2 and b["provenance"]["resumed_episodes"] == 0
    assert not (tmp_path / "chunked.json.partial.jsonl").exists()  # removed once the results file is written
    assert result_problems(b) == []


def test_a_stopped_run_resumes_where_it_stopped(tmp_path, stoppable_play):
    from mas_trainer.run.eval_cli import main

    full = tmp_path / "full.json"
    out = tmp_path / "r.json"
    partial = tmp_path / "r.json.partial.jsonl"
    calls, crash = stoppable_play
    crash[0] = False
    assert main(ARGS + ["--chunk-size", "2", "--out", str(full)]) == 0
    calls.clear()
    crash[0] = True
    with pytest.raises(Stopped):
        main(ARGS + ["--chunk-size", "2", "--out", str(out)])
    assert not out.exists()
    lines = partial.read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["start"] == 0  # the first chunk was kept
    first = json.loads(lines[0])
    assert first["machine"]["torch_threads"] == 1 and first["machine"]["cpu"]
    del first["machine"]  # as written before chunks recorded their machine: still resumable
    partial.write_text(json.dumps(first) + "\n")
    with open(partial, "a") as handle:
        handle.write('{"key": "cut short by a kill", "sta')  # a half-written line is ignored

    calls.clear()
    crash[0] = False
    assert main(ARGS + ["--chunk-size", "2", "--out", str(out)]) == 0
    assert calls == [[2, 3], [4]]  # tasks 0-1 were not played again
    data = json.loads(out.read_text())
    assert outcome(data) == outcome(json.loads(full.read_text()))
    assert data["provenance"]["resumed_episodes"] == 2
    assert not partial.exists() and result_problems(data) == []
    # Which machine played which tasks: the old chunk says nothing, the new ones are merged into one span.
    whole = json.loads(full.read_text())["provenance"]["machines"]
    assert [m["tasks"] for m in whole] == [[0, 5]] and whole[0]["torch_threads"] == 1
    assert data["provenance"]["machines"] == [{"tasks": [0, 2]}, {**whole[0], "tasks": [2, 5]}]


def test_progress_of_other_settings_is_not_reused(tmp_path, stoppable_play):
    from mas_trainer.run.eval_cli import main

    out = tmp_path / "r.json"
    partial = tmp_path / "r.json.partial.jsonl"
    calls, crash = stoppable_play
    with pytest.raises(Stopped):
        main(ARGS + ["--chunk-size", "2", "--out", str(out)])
    assert partial.exists()

    # Another answer budget decides other outcomes: the saved chunk must be played again.
    calls.clear()
    crash[0] = False
    other = [a if a != "3" else "4" for a in ARGS]
    assert main(other + ["--chunk-size", "2", "--out", str(out)]) == 0
    assert calls == [[0, 1], [2, 3], [4]]
    assert json.loads(out.read_text())["provenance"]["resumed_episodes"] == 0

    # Same settings, but --restart: the progress file is dropped.
    calls.clear()
    crash[0] = True
    with pytest.raises(Stopped):
        main(ARGS + ["--chunk-size", "2", "--out", str(out)])
    calls.clear()
    crash[0] = False
    assert main(ARGS + ["--chunk-size", "2", "--out", str(out), "--restart"]) == 0
    assert calls == [[0, 1], [2, 3], [4]]


def test_read_chunks_ignores_foreign_and_incomplete_records(tmp_path):
    from mas_trainer.run.eval_progress import Chunk, append_chunk, chunk_plan, read_chunks

    assert chunk_plan(5, 2) == [(0, 2), (2, 4), (4, 5)] and chunk_plan(4, 8) == [(0, 4)]
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_plan(5, 0)
    path = tmp_path / "p.jsonl"
    append_chunk(path, "k", Chunk(0, 2, 1.0, [{"task_index": 0}, {"task_index": 1}], {"a": [2, 1.0, 0]}))
    append_chunk(path, "other", Chunk(2, 4, 1.0, [{"task_index": 2}, {"task_index": 3}]))
    append_chunk(path, "k", Chunk(4, 6, 1.0, [{"task_index": 4}]))  # says 2 episodes, holds 1
    with open(path, "a") as handle:
        handle.write('["not", "a", "record"]\n{"key": "k", "start": "x"}\n{"key": "k", "sta')
    found = read_chunks(path, "k")
    assert list(found) == [(0, 2)] and found[(0, 2)].role_steps == {"a": [2, 1.0, 0]}
    assert read_chunks(tmp_path / "missing.jsonl", "k") == {} and read_chunks(None, "k") == {}


def test_machines_of_merges_consecutive_chunks_of_one_machine():
    from mas_trainer.run.eval_progress import Chunk, machines_of

    a, b = {"cpu": "A", "torch_threads": 1}, {"cpu": "B", "torch_threads": 2}
    chunks = [Chunk(4, 6, 1.0, [], machine=b), Chunk(0, 2, 1.0, [], machine=a), Chunk(2, 4, 1.0, [], machine=a),
              Chunk(6, 7, 1.0, [], machine=a)]
    assert machines_of(chunks) == [{"tasks": [0, 4], **a}, {"tasks": [4, 6], **b}, {"tasks": [6, 7], **a}]


def test_bad_chunk_size_is_a_usage_error(capsys):
    from mas_trainer.run.eval_cli import main

    assert main(["--env", "plan_path", "--model", "tiny", "--chunk-size", "0", "--out", "/nonexistent/x.json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--chunk-size must be >= 1" in err[0]
