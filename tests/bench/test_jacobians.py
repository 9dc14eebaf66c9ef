"""The Jacobian benchmarks (bench/jacobians.py) through ``python -m bench``: a row per layer of each
family, and every stage of the paper-scale rehearsal."""

import pytest


def test_bench_jacobian_prints_a_row_per_layer(capsys):
    from bench.__main__ import main

    main(["jacobian", "--dims", "64", "--samples", "4", "--quick"])
    lines = capsys.readouterr().out.splitlines()
    header = next(line.split() for line in lines if line.split()[:1] == ["layer"])
    rows = [line.split() for line in lines if line.split()[:1] in (["llama"], ["gpt_neox"])]
    assert [r[:3] for r in rows] == [["llama", "64", "172"], ["gpt_neox", "64", "256"]]
    assert all(len(r) == len(header) for r in rows)
    assert all(float(r[header.index("err")]) < 1e-5 for r in rows)  # closed form vs the paper's method


def test_bench_scale_times_every_stage_and_projects_by_its_unit(capsys):
    from bench.__main__ import main
    from bench.jacobians import SCALE_STAGES

    main(["scale", "--d-model", "64", "--d-ff", "128", "--heads", "4", "2", "--layers", "2", "--samples", "3",
          "--tokens", "8", "--full-layers", "8", "--full-samples", "300", "--checkpoints", "2", "--threads", "1"])
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stage"))
    rows = {line.split()[0]: line.split() for line in lines[start + 1:] if line.split()}
    stages = list(SCALE_STAGES)
    assert list(rows)[:-2] == stages[:5] + ["schur_start"] + stages[5:] and "total" in rows
    full_units = {"activations": 8 * 300, "jacobians": 8 * 300, "per_sample_stats": 8 * 300, "spectra": 8,
                  "schur": 8, "schur_start": 2, "topology": 2 * 8, "statistics": 8}  # schur: both modes per layer
    for stage, units in full_units.items():
        seconds, measured, per_unit = float(rows[stage][1]), int(rows[stage][2]), float(rows[stage][3])
        value, unit = float(rows[stage][4]), rows[stage][5]
        assert per_unit == pytest.approx(seconds / measured, rel=1e-3, abs=1e-3), stage
        assert value == pytest.approx(per_unit * units / (3600 if unit == "h" else 60), rel=1e-3, abs=0.051), stage


def test_bench_coupling_prints_a_row_per_layer_and_length(capsys):
    from bench.__main__ import main

    main(["coupling", "--dims", "64", "--tokens", "4", "--released-rows", "8"])
    lines = capsys.readouterr().out.splitlines()
    header = next(line.split() for line in lines if line.split()[:1] == ["layer"])
    rows = [line.split() for line in lines if line.split()[:1] in (["llama"], ["gpt_neox"])]
    assert [r[:3] for r in rows] == [["llama", "64", "4"], ["gpt_neox", "64", "4"]]
    assert all(len(r) == len(header) for r in rows)
    assert all(float(r[header.index(c)]) < 1e-5 for r in rows for c in ("err", "err_tok"))
