"""Leaderboard: schema, `mas-leaderboard submit` checks (real jsonschema, real env fingerprints), `build` output."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from leaderboard import SCHEMA_PATH, loading
from leaderboard.cli import main
from leaderboard.sample import sample_result, wilson_interval
from leaderboard.schema_check import schema_problems
from leaderboard.store import content_hash

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def entries(tmp_path: Path) -> Path:
    return tmp_path / "entries"


@pytest.fixture(scope="module")
def good() -> dict:
    """A valid plan_path 4x4 result with the installed env's real fingerprint."""
    return sample_result("plan_path", {"preset": "4x4"}, "mas_at_grpo_shared", successes=[True, False, True, True, False])


def write(tmp_path: Path, data, name: str = "results.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def submit(path: Path, entries: Path, capsys) -> tuple[int, str, str]:
    code = main(["submit", str(path), "--entries", str(entries)])
    out, err = capsys.readouterr()
    return code, out, err


def refused(tmp_path, entries, capsys, data) -> str:
    """Submit ``data``; assert it is refused cleanly (exit 2, nothing stored, no traceback); return stderr."""
    code, out, err = submit(write(tmp_path, data), entries, capsys)
    assert code == 2, (out, err)
    assert "Traceback" not in err
    assert err.startswith("refused:")
    assert not entries.exists() or not list(entries.glob("*.json"))
    return err


# ---------------------------------------------------------------- schema


def test_schema_is_valid_draft_2020_12_and_strict():
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)

    def closed_objects(node, where="schema"):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, f"{where} allows unknown fields"
                assert node.get("required"), f"{where} has no required fields"
            for key, value in node.items():
                closed_objects(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                closed_objects(value, f"{where}[{i}]")

    closed_objects(schema)


def test_brief_example_matches_schema(good):
    example = copy.deepcopy(good)
    example["provenance"]["label"] = "optional free text"
    assert schema_problems(example) == []
    del example["provenance"]["label"]  # label is optional
    assert schema_problems(example) == []


def test_wilson_interval_contains_rate():
    for wins, n in [(0, 1), (1, 1), (0, 50), (31, 50), (50, 50)]:
        lo, hi = wilson_interval(wins, n)
        assert 0.0 <= lo <= wins / n <= hi <= 1.0


# ---------------------------------------------------------------- submit: accepted


def test_valid_file_is_accepted_and_stored(tmp_path, entries, capsys, good):
    code, out, err = submit(write(tmp_path, good), entries, capsys)
    assert code == 0, err
    stored = list(entries.glob("*.json"))
    assert [p.name for p in stored] == [f"plan_path__mas_at_grpo_shared__{content_hash(good)[:12]}.json"]
    assert json.loads(stored[0].read_text()) == good
    assert "accepted" in out
    assert not list(entries.glob(".*"))  # no temp files left behind by the atomic write


def test_specialized_and_single_methods_are_accepted(tmp_path, entries, capsys):
    for i, (env, method) in enumerate([("sudoku", "mas_at_grpo_specialized"), ("plan_path", "single_prompt")]):
        code, _, err = submit(write(tmp_path, sample_result(env, method=method), f"r{i}.json"), entries, capsys)
        assert code == 0, err
    assert len(list(entries.glob("*.json"))) == 2


def test_validate_command_does_not_store(tmp_path, entries, good):
    assert main(["validate", str(write(tmp_path, good)), "--entries", str(entries)]) == 0
    assert not entries.exists()


# ---------------------------------------------------------------- submit: refused


def test_malformed_json(tmp_path, entries, capsys):
    err = refused(tmp_path, entries, capsys, '{"schema_version": 1,')
    assert "(root): not valid JSON" in err and "line 1" in err


def test_not_an_object_nan_and_repeated_keys(tmp_path, entries, capsys):
    assert "(root): must be a JSON object, got a JSON array" in refused(tmp_path, entries, capsys, "[1, 2]")
    assert "NaN is not valid JSON" in refused(tmp_path, entries, capsys, '{"a": NaN}')
    assert "repeated key 'a'" in refused(tmp_path, entries, capsys, '{"a": 1, "a": 2}')


def test_too_large_and_missing_file(tmp_path, entries, capsys, monkeypatch, good):
    monkeypatch.setattr(loading, "MAX_BYTES", 100)
    assert "the limit is 100 bytes" in refused(tmp_path, entries, capsys, good)
    code, _, err = submit(tmp_path / "nope.json", entries, capsys)
    assert code == 2 and "does not exist" in err


def test_missing_field(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    del bad["seed"]
    del bad["env"]["eval_set_fingerprint"]
    err = refused(tmp_path, entries, capsys, bad)
    assert "seed: required field is missing" in err
    assert "env.eval_set_fingerprint: required field is missing" in err


def test_wrong_type_bad_enum_and_unknown_field(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["summary"]["success_rate"] = "0.6"
    bad["episodes"][2]["success"] = 1
    bad["method"] = "magic"
    bad["model"]["surprise"] = True
    err = refused(tmp_path, entries, capsys, bad)
    assert "summary.success_rate: wrong type: expected number, got string" in err
    assert "episodes[2].success: wrong type: expected boolean, got integer" in err
    assert 'method: "magic" is not one of:' in err
    assert "model.surprise: unexpected field" in err


def test_inconsistent_success_rate(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["summary"]["success_rate"] = 0.61  # the episodes say 3/5 = 0.6
    err = refused(tmp_path, entries, capsys, bad)
    assert "summary.success_rate: is 0.61 but the episodes' success mean is 0.6" in err


def test_inconsistent_counts_ci_and_repeated_task(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["summary"]["episodes"] = 50
    bad["summary"]["ci95"] = [0.7, 0.9]
    bad["episodes"][3]["task_index"] = 0
    err = refused(tmp_path, entries, capsys, bad)
    assert "summary.episodes: is 50 but the file lists 5 episodes" in err
    assert "summary.ci95: [0.7, 0.9] does not contain success_rate 0.6" in err
    assert "episodes[3].task_index: 0 repeats episodes[0]" in err


def test_fingerprint_mismatch(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    # The 5x5 eval set's real fingerprint under 4x4 kwargs: a different evaluation set.
    bad["env"]["eval_set_fingerprint"] = sample_result("plan_path", {"preset": "5x5"})["env"]["eval_set_fingerprint"]
    err = refused(tmp_path, entries, capsys, bad)
    assert "env.eval_set_fingerprint: fingerprint mismatch" in err


def test_env_version_unknown_env_and_bad_kwargs(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["env"]["version"] = "7"
    err = refused(tmp_path, entries, capsys, bad)
    assert "env.version: env version mismatch" in err and "fingerprint" not in err.split("env.version")[0]
    bad = copy.deepcopy(good)
    bad["env"]["name"] = "chess"
    assert "env.name: unknown env 'chess'" in refused(tmp_path, entries, capsys, bad)
    bad = copy.deepcopy(good)
    bad["env"]["kwargs"] = {"preset": "99x99"}
    assert "env.kwargs: the installed plan_path env rejects these kwargs" in refused(tmp_path, entries, capsys, bad)
    bad = copy.deepcopy(good)
    bad["env"]["split"] = "train"
    assert "env.split: is 'train'" in refused(tmp_path, entries, capsys, bad)


def test_method_workflow_mismatch(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["method"] = "single_grpo"
    err = refused(tmp_path, entries, capsys, bad)
    assert "env.workflow: is 'mas' but method 'single_grpo' needs workflow 'single'" in err


def test_policy_mode_must_follow_method(tmp_path, entries, capsys, good):
    bad = copy.deepcopy(good)
    bad["method"] = "mas_at_grpo_specialized"
    assert "model.policy_mode: is 'shared' but method 'mas_at_grpo_specialized' needs 'specialized'" in refused(
        tmp_path, entries, capsys, bad
    )
    bad["model"]["policy_mode"] = "specialized"
    bad["model"]["policies"] = {"planner": good["model"]["policies"]["shared"]}
    err = refused(tmp_path, entries, capsys, bad)
    assert "model.policies: specialized mode needs one policy per role ['planner', 'tool']" in err


def test_duplicate_is_refused_even_with_a_new_label(tmp_path, entries, capsys, good):
    assert submit(write(tmp_path, good), entries, capsys)[0] == 0
    again = copy.deepcopy(good)
    again["provenance"]["label"] = "resubmitted"
    again["provenance"]["date"] = "2026-12-03T09:00:00Z"
    code, _, err = submit(write(tmp_path, again, "again.json"), entries, capsys)
    assert code == 2 and "duplicate" in err and "Traceback" not in err
    assert len(list(entries.glob("*.json"))) == 1
    other_seed = copy.deepcopy(good)
    other_seed["seed"] = 1
    assert submit(write(tmp_path, other_seed, "seed1.json"), entries, capsys)[0] == 0


def test_cli_runs_as_module_and_as_plain_script(tmp_path, good):
    path = write(tmp_path, {**good, "seed": "zero"})
    for launcher in (["-m", "leaderboard.cli"], [str(REPO / "leaderboard" / "cli.py")]):
        proc = subprocess.run(
            [sys.executable, *launcher, "submit", str(path), "--entries", str(tmp_path / "e")],
            cwd=tmp_path if launcher[0] != "-m" else REPO, capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert "seed: wrong type: expected integer, got string" in proc.stderr
        assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- build


def _populate(tmp_path, entries, capsys):
    results = [
        sample_result("plan_path", method="mas_at_grpo_shared", successes=[True] * 4 + [False]),
        sample_result("plan_path", method="single_prompt", successes=[False] * 4 + [True], params=1_700_000_000,
                      model_id="Qwen3-1.7B", label="<script>alert('x')</script>"),
        sample_result("sudoku", method="mas_at_grpo_specialized", successes=[True, False]),
    ]
    for i, result in enumerate(results):
        assert submit(write(tmp_path, result, f"r{i}.json"), entries, capsys)[0] == 0
    return results


def test_build_renders_entries_and_escapes_labels(tmp_path, entries, capsys):
    _populate(tmp_path, entries, capsys)
    site = tmp_path / "site"
    assert main(["build", "--entries", str(entries), "--out", str(site)]) == 0
    html = (site / "index.html").read_text()
    markdown = (site / "leaderboard.md").read_text()
    assert (site / "success.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    for text in ("mas_at_grpo_shared", "single_prompt", "mas_at_grpo_specialized", "Qwen3-1.7B", "1.7B", "135M"):
        assert text in html
    assert html.count("<tr data-entry=") == 3  # the per-run view
    assert '<table class="board" data-env="plan_path" data-view="agg">' in html
    assert '<table class="board" data-env="sudoku" data-view="run">' in html
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "data:image/png;base64," in html and "http://" not in html and "https://" not in html
    assert "| mas_at_grpo_shared | smollm2-135m | 135M |" in markdown and "| 80.0 [" in markdown
    assert "| single_prompt | Qwen3-1.7B | 1.7B |" in markdown and "| 20.0 [" in markdown
    assert "## plan_path" in markdown and "## sudoku" in markdown and "mean over seeds" in markdown
    # Results-file links point into the entries folder, relative to the page.
    assert 'href="../entries/plan_path__mas_at_grpo_shared__' in html


def test_build_is_deterministic_and_handles_no_entries(tmp_path, entries, capsys):
    _populate(tmp_path, entries, capsys)
    outputs = []
    for name in ("a", "b"):
        assert main(["build", "--entries", str(entries), "--out", str(tmp_path / name)]) == 0
        outputs.append({p.name: p.read_bytes() for p in sorted((tmp_path / name).iterdir())})
    assert outputs[0] == outputs[1] and set(outputs[0]) == {"index.html", "leaderboard.md", "success.png"}
    empty = tmp_path / "empty"
    assert main(["build", "--entries", str(tmp_path / "none"), "--out", str(empty)]) == 0
    assert "No entries yet" in (empty / "index.html").read_text()
    capsys.readouterr()


def test_build_skips_hand_broken_entries(tmp_path, entries, capsys):
    _populate(tmp_path, entries, capsys)
    (entries / "zz_broken.json").write_text('{"schema_version": 1}')
    assert main(["build", "--entries", str(entries), "--out", str(tmp_path / "site")]) == 0
    assert "skipping zz_broken.json" in capsys.readouterr().err
    assert (tmp_path / "site" / "index.html").read_text().count("<tr data-entry=") == 3


def test_fingerprint_computation_is_time_limited(tmp_path, entries, capsys, monkeypatch, good):
    from leaderboard import envinfo

    monkeypatch.setattr(envinfo, "FINGERPRINT_TIMEOUT_S", 0.001)
    bad = copy.deepcopy(good)
    bad["env"]["kwargs"] = {"preset": "4x4", "test_size": 10**9}  # would run for hours; must be cut off
    err = refused(tmp_path, entries, capsys, bad)
    assert "env.kwargs: the installed plan_path env rejects these kwargs: computing the eval-set fingerprint took over" in err


# ---------------------------------------------------------------- rows: identity and aggregation

from html.parser import HTMLParser  # noqa: E402

from leaderboard import DEFAULT_ENTRIES_DIR, stats  # noqa: E402
from leaderboard.chart import TITLE  # noqa: E402
from leaderboard.rows import aggregate, env_sort_key, load_rows  # noqa: E402


class Tables(HTMLParser):
    """Cell texts of every ``table.board``: {(env, view): [[cell text, ...], ...]} (details' bodies left out)."""

    def __init__(self, html: str):
        super().__init__()
        self.tables: dict[tuple[str, str], list[list[str]]] = {}
        self.headers: dict[tuple[str, str], list[str]] = {}
        self.sections: list[str] = []
        self._table = self._row = self._cell = None
        self._in_code = 0
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and a.get("class") == "env":
            self.sections.append(a["id"])
        elif tag == "table" and a.get("class") == "board":
            self._table = (a["data-env"], a["data-view"])
            self.tables[self._table], self.headers[self._table] = [], []
        elif self._table and tag == "tr":
            self._row = []
        elif self._table and tag in ("td", "th"):
            self._cell = []
        elif tag == "code":
            self._in_code += 1

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag == "code":
            self._in_code -= 1
        elif self._table and tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif self._table and tag == "tr" and self._row is not None:
            target = self.headers if not self.tables[self._table] and not self.headers[self._table] else self.tables
            target[self._table].append(self._row) if target is self.tables else target.__setitem__(self._table, self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None and not self._in_code:
            self._cell.append(data)


def _build_html(entries: Path, out: Path) -> Tables:
    assert main(["build", "--entries", str(entries), "--out", str(out)]) == 0
    return Tables((out / "index.html").read_text())


def _store(tmp_path, entries, capsys, *results):
    for i, result in enumerate(results):
        code, _, err = submit(write(tmp_path, result, f"s{i}.json"), entries, capsys)
        assert code == 0, err


def _trained(result: dict, step: int) -> dict:
    for policy in result["model"]["policies"].values():
        policy["id"] = f"run/checkpoints/step-{step:06d}/policies/shared"
    return result


def test_entries_differing_only_in_seed_aggregate_into_one_row(tmp_path, entries, capsys):
    budget = "mas-eval ... --budget '15 CPU min'"
    _store(tmp_path, entries, capsys,
           _trained(sample_result("plan_path", method="single_at_grpo", seed=0, successes=[True, True, False, False],
                                  command=budget), 21),
           _trained(sample_result("plan_path", method="single_at_grpo", seed=1, successes=[True, False, False, False],
                                  command=budget), 23),
           _trained(sample_result("plan_path", method="single_at_grpo", seed=2, successes=[True, True, True, False],
                                  command=budget), 19))
    groups = aggregate(load_rows(entries))
    assert len(groups) == 1
    g = groups[0]
    assert g.seeds == (0, 1, 2) and [round(v, 4) for _, v in g.per_seed] == [0.5, 0.25, 0.75]
    assert g.mean == pytest.approx(0.5) and g.interval == "hierarchical bootstrap"
    assert 0.0 <= g.ci_low < g.mean < g.ci_high <= 1.0
    assert g.wins == (3, 2, 1, 0)  # per task (sorted ids), over the three seeds
    tables = _build_html(entries, tmp_path / "site")
    agg, runs = tables.tables[("plan_path", "agg")], tables.tables[("plan_path", "run")]
    assert len(agg) == 1 and len(runs) == 3
    header = tables.headers[("plan_path", "agg")]
    row = dict(zip(header, agg[0]))
    assert row["Seeds"] == "0, 1, 2" and row["Per seed %"] == "50.0, 25.0, 75.0"
    assert row["Success % (mean over seeds)"].startswith("50.0 (")
    assert row["Training"] == "steps 21, 23, 19 · budget 15 CPU min"  # steps reached, per seed
    assert row["Model (per role)"] == "smollm2-135m (trained)"
    assert row["Row"] == g.id and g.id.startswith("plan_path-")


def test_entries_differing_in_env_settings_decoding_or_budget_do_not_aggregate(tmp_path, entries, capsys):
    base = dict(env_name="plan_path", method="single_at_grpo", command="x --budget '15 CPU min'")
    _store(tmp_path, entries, capsys,
           sample_result(**base, kwargs={"preset": "4x4"}, successes=[True, False]),
           sample_result(**base, kwargs={"preset": "4x4", "max_turns": 8}, seed=1, successes=[False, False]),  # 8: the 4x4 default
           sample_result(**base, kwargs={"preset": "4x4", "max_turns": 3}, successes=[True, True]),
           sample_result(**base, kwargs={"preset": "4x4"}, successes=[True, True],
                         decoding={"temperature": 0.0, "samples": 1, "max_new_tokens": 8,
                                   "max_new_tokens_per_role": {"solver": 16}}),
           sample_result(**{**base, "command": "x --budget '30 CPU min'"}, kwargs={"preset": "4x4"}, successes=[False, True]))
    groups = aggregate(load_rows(entries))
    assert len(groups) == 4
    by_seeds = sorted(len(g.runs) for g in groups)
    assert by_seeds == [1, 1, 1, 2]  # only the explicit default max_turns=8 joined the plain one
    texts = {(g.settings_text, g.decoding_text, g.training_text) for g in groups}
    assert ("max_turns=3, preset=4x4", "max 8 tok · 1 sample · T=0", "? steps · budget 15 CPU min") in texts
    assert ("preset=4x4", "max 8 tok (solver 16) · 1 sample · T=0", "? steps · budget 15 CPU min") in texts
    assert ("preset=4x4", "max 8 tok · 1 sample · T=0", "? steps · budget 30 CPU min") in texts
    assert len({g.id for g in groups}) == 4


def test_rows_show_role_models_steps_and_swapped_roles(tmp_path, entries, capsys):
    result = sample_result("sudoku", method="mas_at_grpo_specialized", successes=[True, False])
    for role, policy in result["model"]["policies"].items():
        policy["id"] = f"run/checkpoints/step-000012/policies/{role}"
    result["provenance"]["swap_roles"] = True
    result["provenance"]["command"] = "baselines mas_at_grpo_specialized --budget '5 CPU min'"
    _store(tmp_path, entries, capsys, result)
    (g,) = aggregate(load_rows(entries))
    assert g.roles_text == "planner: smollm2-135m (trained) · tool: smollm2-135m (trained) · roles swapped"
    assert g.training_text == "12 steps · budget 5 CPU min" and g.interval == "wilson"
    assert (g.ci_low, g.ci_high) == tuple(result["summary"]["ci95"])  # one seed: the per-task interval


def test_rows_say_which_machine_played_which_tasks(tmp_path, entries, capsys):
    result = sample_result("sudoku", successes=[True, False, True])
    result["provenance"]["machines"] = [
        {"tasks": [0, 2]},  # a chunk written before chunks recorded their machine
        {"tasks": [2, 3], "cpu": "AMD EPYC <b>", "cpu_flags": ["avx2", "fma"], "logical_cpus": 2,
         "torch_threads": 2, "torch": "2.13.0", "python": "3.11.7"},
    ]
    _store(tmp_path, entries, capsys, result)
    (row,) = load_rows(entries)
    assert row.machines == "tasks 0-1: not recorded; task 2: AMD EPYC <b> (avx2, fma), 2 torch threads"
    _build_html(entries, tmp_path / "site")
    assert "played on: tasks 0-1: not recorded; task 2: AMD EPYC &lt;b&gt; (avx2, fma)" in \
        (tmp_path / "site" / "index.html").read_text()

    result["provenance"]["machines"] = [{"tasks": [0, 3], "cpu": "x", "cpu_flags": ["AVX2; rm"]}]
    assert "cpu_flags" in refused(tmp_path, tmp_path / "fresh-entries", capsys, result)


def test_env_sections_in_stable_order(tmp_path, entries, capsys):
    _store(tmp_path, entries, capsys, sample_result("sudoku", method="single_prompt"),
           sample_result("sokoban", method="single_prompt"), sample_result("plan_path", method="single_prompt"))
    assert _build_html(entries, tmp_path / "site").sections == ["env-plan_path", "env-sokoban", "env-sudoku"]
    names = ["zeta", "math_tool", "alpha", "coder_tester", "sudoku", "sokoban", "plan_path"]
    assert sorted(names, key=env_sort_key) == ["plan_path", "sokoban", "sudoku", "coder_tester", "math_tool", "alpha", "zeta"]


# ---------------------------------------------------------------- statistics


def test_mcnemar_exact_against_hand_computed_values():
    # b=5, c=1: n=6, 2 * (C(6,0) + C(6,1)) / 2^6 = 2 * 7 / 64 = 0.21875
    assert stats.mcnemar_exact(5, 1) == 0.21875
    assert stats.mcnemar_exact(1, 5) == 0.21875
    # b=8, c=2: 2 * (1 + 10 + 45) / 1024 = 0.109375
    assert stats.mcnemar_exact(8, 2) == 0.109375
    assert stats.mcnemar_exact(4, 0) == 0.125  # 2 / 16
    assert stats.mcnemar_exact(0, 0) == 1.0 and stats.mcnemar_exact(3, 3) == 1.0
    assert stats.mcnemar_exact(0, 3000) == 0.0 or stats.mcnemar_exact(0, 3000) < 1e-300  # exact ints, no overflow


def test_bootstraps_are_deterministic_and_sane():
    assert stats.BOOTSTRAP_RESAMPLES >= 2000
    runs = [[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0]]
    assert stats.hierarchical_bootstrap(runs) == stats.hierarchical_bootstrap(runs)
    lo, hi = stats.hierarchical_bootstrap(runs)
    assert lo < 0.5 < hi
    assert stats.hierarchical_bootstrap([[1, 1], [1, 1]]) == (1.0, 1.0)
    # Seeds that disagree widen the interval compared to one seed with the pooled outcomes.
    spread = stats.hierarchical_bootstrap([[1] * 10, [0] * 10])
    assert spread[1] - spread[0] > 0.9
    assert stats.paired_bootstrap([0.5] * 7) == (0.5, 0.5)
    lo, hi = stats.paired_bootstrap([1, 0, 0, 1, 1, 0, 1, 1])
    assert lo < 0.625 < hi
    # mulberry32's first outputs for seed 1, as the reference JavaScript implementation gives them
    # (the page's script uses the same generator; the browser test checks page and CLI agree)
    draw = stats.mulberry32(1)
    assert [draw() for _ in range(3)] == [0.6270739405881613, 0.002735721180215478, 0.5274470399599522]
    assert stats.fixed(6.25, 1) == "6.3" and stats.fixed(-0.0, 1) == "0.0" and stats.signed(0.0, 1) == "+0.0"


# ---------------------------------------------------------------- compare


def test_compare_prints_paired_difference_interval_and_mcnemar(tmp_path, entries, capsys):
    a = sample_result("plan_path", method="mas_at_grpo_shared", successes=[True] * 6 + [False] * 4)
    b = sample_result("plan_path", method="single_prompt", successes=[True] + [False] * 5 + [True] + [False] * 3)
    pa, pb = write(tmp_path, a, "a.json"), write(tmp_path, b, "b.json")
    assert main(["compare", str(pa), str(pb), "--entries", str(entries)]) == 0
    out = capsys.readouterr().out
    # A solves tasks 0-5, B solves 0 and 6: discordant 5 (A only) and 1 (B only).
    assert "shared tasks: 10 (A has 10, B has 10)" in out
    assert "success on the shared tasks: A 60.0%, B 20.0%" in out
    assert "paired difference A - B: +40.0 points, 95% CI [" in out and "paired bootstrap over the 10 shared tasks" in out
    assert "discordant tasks: A only 5, B only 1; exact two-sided McNemar test on them: p = 0.2188" in out


def test_compare_uses_shared_task_ids_and_aggregated_rows(tmp_path, entries, capsys):
    _store(tmp_path, entries, capsys,
           sample_result("plan_path", method="single_at_grpo", seed=0, successes=[True, True, False, False]),
           sample_result("plan_path", method="single_at_grpo", seed=1, successes=[True, False, False, False]),
           sample_result("plan_path", method="single_prompt", successes=[False, False]))
    groups = {g.method: g for g in aggregate(load_rows(entries))}
    assert main(["compare", groups["single_at_grpo"].id, groups["single_prompt"].id, "--entries", str(entries)]) == 0
    out = capsys.readouterr().out
    assert "(aggregated row, 2 runs)" in out and "shared tasks: 2 (A has 4, B has 2)" in out
    assert "mean success over each row's seeds" in out
    assert "success on the shared tasks: A 75.0%, B 0.0%" in out  # task 0: 2/2, task 1: 1/2
    assert "p-value: not computed" in out


def test_compare_refuses_differing_fingerprints_and_unknown_ids(tmp_path, entries, capsys):
    a = write(tmp_path, sample_result("plan_path", {"preset": "4x4"}), "a.json")
    b = write(tmp_path, sample_result("plan_path", {"preset": "5x5"}), "b.json")
    assert main(["compare", str(a), str(b), "--entries", str(entries)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("refused: eval-set fingerprints differ") and "Traceback" not in err
    assert main(["compare", str(a), "plan_path-00000000", "--entries", str(entries)]) == 2
    assert "neither a results file nor an aggregated-row id" in capsys.readouterr().err


# ---------------------------------------------------------------- today's entries


@pytest.fixture(scope="module")
def todays_site(tmp_path_factory) -> Tables:
    out = tmp_path_factory.mktemp("today")
    assert main(["build", "--entries", str(DEFAULT_ENTRIES_DIR), "--out", str(out)]) == 0
    return Tables((out / "index.html").read_text())


IDENTITY_SKIP = {"", "Row", "Run", "Date", "Label", "Results file", "Results files"}


def test_todays_entries_give_no_two_identical_visible_rows(todays_site):
    """Not even ignoring the row id, the file link, date and label: the configuration columns tell runs apart."""
    assert todays_site.tables, "no entries were rendered"
    for (env, view), body in todays_site.tables.items():
        header = todays_site.headers[(env, view)]
        whole = [tuple(r) for r in body]
        assert len(set(whole)) == len(whole), (env, view)
        keep = [i for i, name in enumerate(header) if name not in IDENTITY_SKIP]
        described = [tuple(r[i] for i in keep) for r in body]
        duplicates = {d for d in described if described.count(d) > 1}
        assert not duplicates, (env, view, duplicates)


def test_todays_page_has_every_env_in_order_and_labels_the_chart_mean_over_seeds(todays_site):
    envs = {path.name.split("__")[0] for path in DEFAULT_ENTRIES_DIR.glob("*.json")}
    assert todays_site.sections == [f"env-{e}" for e in sorted(envs, key=env_sort_key)]
    assert "mean over seeds" in TITLE and "best" not in TITLE.lower()


def test_todays_chart_alt_text_and_compare_on_two_plan_path_entries(tmp_path, capsys):
    assert main(["build", "--entries", str(DEFAULT_ENTRIES_DIR), "--out", str(tmp_path)]) == 0
    html = (tmp_path / "index.html").read_text()
    assert "mean over seeds" in html.split('id="chart"')[1].split(">")[0]
    plan_path = sorted(DEFAULT_ENTRIES_DIR.glob("plan_path__*.json"))
    a = next(p for p in plan_path if "single_at_grpo" in p.name)
    b = next(p for p in plan_path if "single_prompt" in p.name)
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "paired difference A - B:" in out and "95% CI [" in out and "McNemar test on them: p" in out
