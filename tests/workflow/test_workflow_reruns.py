"""The reduced pipeline (tests/configs/tiny.yaml) run for real: what a changed setting re-runs (the
plans from dry runs in this process, tests/plans.py; one from the command line), a job that stops
when Snakemake is killed. A second run elsewhere writing the same bytes: tests/workflow/test_module.py."""

import shutil
import subprocess
from pathlib import Path

import pytest
from plans import EXPENSIVE, library_params, planned, rule_params
from snakemake_runs import ROOT, SNAKEMAKE, TINY, overlay, planned_jobs, snakemake

pytestmark = pytest.mark.workflow


def test_changing_the_emergence_band_replans_only_the_across_papers_tables(tiny_run, tmp_path):
    change = overlay(tmp_path / "band.yaml", "across_papers: {band_sd: 2.0}")
    jobs = planned(tiny_run, TINY, change)
    assert jobs == ACROSS_JOBS


def test_a_plan_in_process_leaves_the_sigterm_handler_as_it_was(tmp_path):
    # Snakemake's scheduler installs its own and keeps it: a process that planned ignored SIGTERM
    # (the re-run table's pool workers then never ended, and the suite hung)
    import signal

    before = signal.getsignal(signal.SIGTERM)
    assert planned(tmp_path, TINY)  # a fresh directory: the whole run is planned
    assert signal.getsignal(signal.SIGTERM) is before


def test_unchanged_config_plans_nothing(tiny_run):
    result = snakemake(tiny_run, "-n", "--cores", "2", "--configfile", str(TINY))
    assert planned_jobs(result.output) == {}, result.output[-3000:]
    assert "Nothing to be done" in result.output


def test_settings_that_cannot_change_results_replan_nothing(tiny_run, tmp_path):
    change = overlay(tmp_path / "speed.yaml", "dynamics: {chunk_mb: 17, threads: 1}\n"
                                              "coupling: {chunk_mb: 5, hold_mb: 1, threads: 1}\n"
                                              "alignment: {threads: 1}\ncontinuity: {threads: 1}\ntrain: {threads: 2}\n")
    assert planned(tiny_run, TINY, change) == {}


def rewritten(value, order, at=()):
    """`value` with every mapping's keys in `order` (a function of the keys' list), but the order of
    models and runs, which is the order of the tables and figures (crosslayer.config.PRESENTATION_ORDER)."""
    from crosslayer.config import PRESENTATION_ORDER

    if isinstance(value, dict):
        keys = list(value) if at in PRESENTATION_ORDER else order(list(value))
        return {key: rewritten(value[key], order, (*at, key)) for key in keys}
    if isinstance(value, list):
        return [rewritten(item, order, (*at, None)) for item in value]
    return value


def written_back(path, order, *, presentation=False):
    """tests/configs/tiny.yaml written back with its keys in `order` (what a formatter, a merged overlay or
    a YAML tool does); with `presentation`, the models and runs too."""
    import yaml

    config = yaml.safe_load(TINY.read_text())
    config = rewritten(config, order) if not presentation else _all_keys(config, order)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


def _all_keys(value, order):
    if isinstance(value, dict):
        return {key: _all_keys(value[key], order) for key in order(list(value))}
    return [_all_keys(item, order) for item in value] if isinstance(value, list) else value


def test_the_same_settings_in_another_key_order_plan_nothing(tiny_run, tmp_path):
    # the probe: sorted keys re-planned 155 jobs of the finished run, training and every Jacobian included
    import random

    shuffle = random.Random(49)
    orders = {"sorted": sorted, "reversed": lambda keys: keys[::-1],
              "shuffled": lambda keys: shuffle.sample(keys, len(keys))}
    for name, order in orders.items():
        config = written_back(tmp_path / f"{name}.yaml", order)
        assert Path(config).read_text() != TINY.read_text()
        assert planned(tiny_run, config) == {}, name


def test_every_number_written_as_the_other_type_plans_nothing(tiny_run, tmp_path):
    # issue 59: the default's alphas written with ints (0, 1 for 0.0, 1.0) re-planned every Schur surgery,
    # community detection and topology statistic; alignment.k: 3.0 failed in its job. One walk over
    # the schema: every integer key as a float, every integral number as an int, at once
    import yaml
    from test_config import effective_config, other_type

    flipped, keys = other_type(effective_config(TINY))
    assert {"dynamics.schur.alphas.*", "alignment.k", "topology.rb_resolution_pos", "toy.seeds.*"} <= set(keys)
    config = tmp_path / "flipped.yaml"
    config.write_text(yaml.safe_dump(flipped, sort_keys=False))
    assert planned(tiny_run, str(config)) == {}


def test_the_order_of_models_and_runs_replans_only_the_tables_and_figures_that_list_them(tiny_run, tmp_path):
    # sorted keys everywhere reorder tiny.yaml's toy runs and transformer ablations (its models are sorted)
    jobs = planned(tiny_run, written_back(tmp_path / "sorted.yaml", sorted, presentation=True))
    assert jobs == {"summarize_toy": 1, "plot_toy": 1, "summarize_ablations": 1, "plot_ablations": 1, "claims": 1}
    # the models reversed: the across-model tables and figures
    jobs = planned(tiny_run, written_back(tmp_path / "reversed.yaml", lambda keys: keys[::-1], presentation=True))
    assert "train_model" not in jobs and "block_jacobians" not in jobs
    assert jobs == {"summarize_toy": 1, "plot_toy": 1, "summarize_ablations": 1, "plot_ablations": 1, "claims": 1,
                    "alignment_table": 1, "continuity_table": 1, "coupling_across_models": 1, "topology_tables": 1,
                    "across_papers_models": 1, "plot_alignment_overview": 1, "plot_dynamics_models": 1,
                    "plot_across_papers_models": 1, "plot_alignment_vs_boundary": 1, "plot_coupling_models": 1}


def _jobs_of(parent):
    """Pids of the job scripts whose parent process is `parent` (Linux /proc)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
            cmdline = (status.parent / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if int(fields.get("PPid", "0")) == parent and b".snakemake/scripts/" in cmdline:
            found.append(int(status.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_job_stops_when_snakemake_is_killed_hard(tmp_path):
    # SIGKILL leaves Snakemake no chance to stop its jobs: each job ends itself when orphaned.
    # 600 steps last several seconds past step 0 on a fast CPU, many times the job's 0.2 s check.
    import time

    longer = overlay(tmp_path / "longer.yaml", "models: {tiny-gelu: {steps: [0, 600], reference_step: 0}}")
    command = ["results/train/tiny-gelu", "--cores", "1", "--configfile", str(TINY), longer]
    snake = subprocess.Popen([*SNAKEMAKE, "--directory", str(tmp_path), *command], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (jobs := _jobs_of(snake.pid)) or not (tmp_path / "results/train/tiny-gelu/step0").exists():
        assert snake.poll() is None and time.monotonic() < deadline, "the training job never started"
        time.sleep(0.1)
    snake.kill()
    snake.wait()
    deadline = time.monotonic() + 15
    while any(Path(f"/proc/{pid}").exists() for pid in jobs):
        assert time.monotonic() < deadline, f"job {jobs} still running 15 s after Snakemake was killed"
        time.sleep(0.2)
    assert "is gone: stopping this job" in (tmp_path / "logs/train_model/tiny-gelu.log").read_text()
    assert not (tmp_path / "results/train/tiny-gelu/loss.tsv").exists()
    # docs/running.md's recovery: --unlock once (the lock outlives a hard kill), then the same command;
    # profiles/default (applied without naming it) carries rerun-incomplete for the cut-short run
    snakemake(tmp_path, *command, "--unlock")
    bare = snakemake(tmp_path, *command, "--workflow-profile", "none", check=False)
    assert bare.returncode != 0 and "IncompleteFilesException" in bare.output, bare.output[-2000:]
    snakemake(tmp_path, *command)
    assert (tmp_path / "results/train/tiny-gelu/loss.tsv").is_file()


#: What a change to any per-paper result of both models re-runs downstream in the across-papers stage.
ACROSS_JOBS = {"across_papers": 2, "across_papers_models": 1, "plot_across_papers": 2, "plot_across_papers_models": 1}
# the across-papers tables and the claims read every paper's results
DOWNSTREAM = {**ACROSS_JOBS, "claims": 1}


def test_changing_k_replans_only_alignment_and_downstream(tiny_run, tmp_path):
    k2 = overlay(tmp_path / "k2.yaml", "alignment: {k: 2}")
    jobs = planned(tiny_run, TINY, k2)
    assert jobs == {
        "mlp_alignment": 8,
        "gated_alignment": 4,  # the SwiGLU model's steps: same k
        "gated_table": 1,
        "summarize_alignment": 2,
        "alignment_table": 1,
        "plot_alignment": 2,
        "plot_alignment_overview": 1,
        **DOWNSTREAM,
    }


def test_changing_a_leiden_resolution_replans_only_communities_and_downstream(tiny_run, tmp_path):
    change = overlay(tmp_path / "gamma.yaml", "topology: {resolution_neg: 0.0}")
    jobs = planned(tiny_run, TINY, change)
    assert jobs == {
        "detect_communities": 8,
        "topology_statistics": 8,
        "topology_tables": 1,
        "plot_topology": 2,
        "plot_alignment_vs_boundary": 1,
        **DOWNSTREAM,
    }


def test_changing_the_trajectory_window_replans_only_the_coupling_stage(tiny_run, tmp_path):
    change = overlay(tmp_path / "window.yaml", "coupling: {window: 5}")
    jobs = planned(tiny_run, TINY, change)
    # a statistic over the stored arrays (issue 39): no Jacobian again, and the per-step tables stay
    assert jobs == {"summarize_coupling": 2, "coupling_across_models": 1, "plot_coupling": 2,
                    "plot_coupling_models": 1, **DOWNSTREAM}


def test_pooling_a_prompt_source_is_a_summarys_setting_that_re_measures_nothing(tiny_run, tmp_path):
    # prepare_prompts (and so every block_coupling job after it) sees the same params either way;
    # only the summaries and figures know which sources pool into source all
    dataset = ("coupling: {{prompts: {{datasets: [{{label: wikitext, path: wt, split: test, field: text, n: 5, "
               "min_words: 20, pooled: {}}}]}}}}")
    pooled, unpooled = (overlay(tmp_path / f"{flag}.yaml", dataset.format(flag)) for flag in ("true", "false"))
    assert rule_params(tiny_run, "prepare_prompts", TINY, pooled) == rule_params(tiny_run, "prepare_prompts", TINY,
                                                                                 unpooled)
    assert rule_params(tiny_run, "summarize_coupling", TINY, pooled)["unpooled"] == []
    assert rule_params(tiny_run, "summarize_coupling", TINY, unpooled)["unpooled"] == ["wikitext"]
    assert rule_params(tiny_run, "plot_coupling", TINY, unpooled)["unpooled"] == ["wikitext"]


def test_the_regularity_source_replans_only_the_coupling_figures(tiny_run, tmp_path):
    change = overlay(tmp_path / "source.yaml", "coupling: {regularity_source: corpus}")
    assert planned(tiny_run, TINY, change) == {"plot_coupling": 2}


def test_changing_the_effective_rank_power_replans_only_the_continuity_stage(tiny_run, tmp_path):
    change = overlay(tmp_path / "erank.yaml", "continuity: {erank_power: 1}")
    jobs = planned(tiny_run, TINY, change)
    assert jobs == {"continuity_statistics": 8, "summarize_continuity": 2, "continuity_table": 1,
                    "plot_continuity": 2, "ablation_continuity": 4, "summarize_ablations": 1, "plot_ablations": 1,
                    **DOWNSTREAM}


def test_changing_toy_steps_replans_only_the_toy_runs(tiny_run, tmp_path):  # one job per run, its 2 seeds in turn
    change = overlay(tmp_path / "steps.yaml", "toy: {steps: 99}")
    jobs = planned(tiny_run, TINY, change)
    assert jobs == {"train_toy": 2, "summarize_toy": 1, "plot_toy": 1, "claims": 1}


def test_changing_the_ablation_steps_replans_only_the_ablations(tiny_run, tmp_path):
    change = overlay(tmp_path / "steps.yaml", "transformer_ablations: {steps: 8}")
    jobs = planned(tiny_run, TINY, change)
    assert jobs == {"train_ablation": 4, "ablation_continuity": 4, "summarize_ablations": 1, "plot_ablations": 1,
                    "claims": 1}


def test_a_run_finished_before_the_claims_stage_plans_only_the_claims(tiny_run, tmp_path):
    # the claims read what every paper's stage wrote: adding them to a finished run re-runs nothing
    # upstream (copytree keeps the files' times, and Snakemake's records travel in .snakemake)
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, symlinks=True)
    for path in ("results/claims", "results/figures/claims"):
        shutil.rmtree(run / path)
    assert planned(run, TINY) == {"claims": 1}


def _edited(monkeypatch, name):
    """Plans from here on see the library file `name` (under crosslayer/) as changed."""
    import crosslayer.code_digest as code

    digest = code._file_digest
    monkeypatch.setattr(code, "_file_digest",
                        lambda path: "0" * 64 if path.relative_to(code.LIBRARY).as_posix() == name else digest(path))


def test_every_rule_has_the_digest_of_the_library_code_its_script_runs(tmp_path):
    from crosslayer.code_digest import library_digest

    scripts = ROOT / "workflow" / "scripts"
    rules = library_params(tmp_path, TINY)
    assert len(rules) > 60
    assert {rule: library for rule, (_, library) in rules.items()} == \
        {rule: library_digest(scripts / script) for rule, (script, _) in rules.items()}


def test_an_edit_of_a_claims_catalogue_replans_only_the_claims(tiny_run, monkeypatch):
    # Snakemake's code trigger sees the rule's script, not the library it imports: each rule has
    # the digest of its script's library code as a parameter (tests/test_code_digest.py)
    assert planned(tiny_run, TINY) == {}
    _edited(monkeypatch, "claims/catalogue/003.yaml")
    assert planned(tiny_run, TINY) == {"claims": 1}


def test_an_edit_of_a_library_module_replans_the_rules_that_import_it_and_what_reads_them(tiny_run, monkeypatch):
    from crosslayer.code_digest import LIBRARY, library_files

    importers = {rule for rule, (script, _) in library_params(tiny_run, TINY).items()
                 if LIBRARY / "alignment" / "measure.py" in library_files(ROOT / "workflow" / "scripts" / script)}
    assert "mlp_alignment" in importers and "train_model" not in importers
    _edited(monkeypatch, "alignment/measure.py")
    jobs = planned(tiny_run, TINY)
    assert jobs["mlp_alignment"] == 8 and "claims" in jobs  # every checkpoint's, and the verdicts downstream
    assert {rule for rule in jobs if rule in EXPENSIVE} <= importers, jobs
