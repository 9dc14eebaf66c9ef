"""The paper-scale rehearsal (bench/scale.py) through ``python -m bench scale``: every paper's
stages timed and projected by their units to one checkpoint of the paper's suite."""

import pytest


def test_coupling_suite_units_count_every_prompt_and_token_wise_layer():
    from bench.scale import coupling_suite_units

    # config/suites/coupling.yaml: 6 benchmarks x 200 + 100 WikiText-2 + GSM8K's 200 chain-of-thought copies;
    # token-wise: 8 prompts of 16 tokens at layers 10, 11, 16
    assert coupling_suite_units() == (1500, 8, 16, 3)


@pytest.mark.parametrize("family", ["llama", "gpt_neox"])
def test_bench_scale_times_every_stage_and_projects_by_its_unit(capsys, family):
    from bench.__main__ import main
    from bench.scale import PAPER_STAGES

    main(["scale", "--family", family, "--d-model", "64", "--d-ff", "128", "--heads", "4", "2" if family == "llama"
          else "4", "--layers", "2", "--samples", "3", "--tokens", "8", "--prompt-tokens", "8", "--full-layers", "8",
          "--full-samples", "300", "--checkpoints", "2", "--threads", "1"])
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stage"))
    rows = {line.split()[0]: line.split() for line in lines[start + 1:] if line.split()}
    ours = [stage for paper in sorted(PAPER_STAGES) for stage in PAPER_STAGES[paper]]
    ours = ours[:7] + ["per_sample_other"] + ours[7:9] + ["schur_start"] + ours[9:]
    assert list(rows)[:len(ours)] == ours and [r for r in rows if r.startswith("total")] == [
        "total_000", "total_002", "total_003", "total_004"]
    full_units = {"alignment": 8, "continuity": 8, "coupling_depth": 1500 * 8, "coupling_token": 8 * 3,
                  "activations": 8 * 300, "jacobians": 8 * 300, "per_sample_stats": 8 * 300,
                  "per_sample_other": 8 * 300, "spectra": 8, "schur": 8, "schur_start": 2, "topology": 2 * 8,
                  "statistics": 8}  # schur: both modes per layer
    totals = {}
    for stage, units in full_units.items():
        paper, seconds, measured, per_unit = rows[stage][1], float(rows[stage][2]), int(rows[stage][3]), float(
            rows[stage][4])
        value, unit = float(rows[stage][5]), rows[stage][6]
        assert per_unit == pytest.approx(seconds / measured, rel=1e-3, abs=1e-3), stage
        assert value == pytest.approx(per_unit * units / (3600 if unit == "h" else 60), rel=1e-3, abs=0.051), stage
        if stage != "per_sample_other":  # the route the device does not take is printed, not counted
            totals[paper] = totals.get(paper, 0.0) + per_unit * units
    for paper, seconds in totals.items():
        value, unit = float(rows[f"total_{paper}"][2]), rows[f"total_{paper}"][3]
        assert value == pytest.approx(seconds / (3600 if unit == "h" else 60), abs=0.051 * 13), paper


def test_bench_scale_runs_only_the_papers_asked_for(capsys):
    from bench.__main__ import main

    main(["scale", "--d-model", "64", "--d-ff", "128", "--heads", "4", "2", "--layers", "2", "--papers", "000", "003",
          "--full-layers", "8", "--threads", "1"])
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stage"))
    assert [line.split()[0] for line in lines[start + 1:] if line.split()][:4] == [
        "alignment", "continuity", "total_000", "total_003"]


def test_bench_scale_schur_forms_in_workers_overlap_the_device(capsys):
    from bench.__main__ import main

    main(["scale", "--d-model", "64", "--d-ff", "128", "--heads", "4", "2", "--layers", "2", "--samples", "2",
          "--tokens", "8", "--stages", "schur", "--workers", "2", "--full-layers", "8", "--threads", "2"])
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("schur "))
    assert "2 worker(s), CPU) beside 4 Haar draws" in row
