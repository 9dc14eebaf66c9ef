"""The Jacobian benchmarks (bench/jacobians.py) through ``python -m bench``: a row per layer of each
family."""

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


def test_bench_coupling_prints_a_row_per_layer_and_length(capsys):
    from bench.__main__ import main

    main(["coupling", "--dims", "64", "--tokens", "4", "--released-rows", "8"])
    lines = capsys.readouterr().out.splitlines()
    header = next(line.split() for line in lines if line.split()[:1] == ["layer"])
    rows = [line.split() for line in lines if line.split()[:1] in (["llama"], ["gpt_neox"])]
    assert [r[:3] for r in rows] == [["llama", "64", "4"], ["gpt_neox", "64", "4"]]
    assert all(len(r) == len(header) for r in rows)
    assert all(float(r[header.index(c)]) < 1e-5 for r in rows for c in ("err", "err_tok"))
