"""Benchmarks that print tables (``python -m bench --help``, from the repository root).

``svd``     seconds per layer for the top-k MLP-product subspaces: forming ``W_down @ W_up``,
            then our ARPACK top-k path (float64) vs the papers' full float32 SVD
            (``torch.linalg.svd``), with the top-k subspace accuracy: overlap with the exact
            float64 full-SVD subspace.
``memory``  peak RSS of the weight analysis of a whole checkpoint, read one layer at a time,
            for a synthetic checkpoint of a given shape (default: Pythia-1.4B's), next to the
            one-layer formula.
``continuity`` time and peak memory of paper 003's continuity stage on a synthetic Llama-shaped
            checkpoint (default: Llama-3.1-8B's layer shapes, 3 layers, projected to 32), and the
            float32 SVD seconds of each projection shape.
``toy``     paper 003's toy: seconds per Adam step of one seed, alone and with 3 seeds batched, on
            the CPU (one thread) and on CUDA where there is one, its matrix-product FLOP/s as a share of the device's float32 GEMM
            rate, one tracked row's cost; the default's Table 1 grid through Snakemake (wall time,
            seconds per job) and its projection to the paper's 9,380 steps.
``e2e``     wall time of the embedded default workflow, end to end, in a fresh directory.
``jobs``    where a finished run's job-seconds go: per rule, jobs and seconds from its
            ``benchmarks/`` files, and the seconds a fresh interpreter takes to import what the
            rule's script imports (a fixed cost per job); with ``--fixed-from`` the benchmarks of a
            run of tests/configs/tiny.yaml, each rule's fixed cost and computation.
``jacobian`` seconds per single-token block Jacobian (paper 004) of a Llama-style (SwiGLU,
            d_ff = 2.6875 d) and a GPT-NeoX-style (parallel, d_ff = 4 d) layer: the paper's
            ``torch.autograd.functional.jacobian``, the same with ``vectorize=True``,
            ``torch.func.jacrev`` + ``vmap``, and our batched closed form; ratios vs the paper's
            method, our FLOP/s as a fraction of the machine's measured GEMM FLOP/s, the per-sample
            statistics (torch path on the Jacobians' device, float64 and float32), peak RSS.
``topology`` seconds per snapshot of the activation-correlation topology (paper 004) on seeded
            factor-model data: correlation matrix, top-k graph, signed Leiden CPM, and the
            alternatives Leiden modularity and InfoMap; peak RSS.
``coupling`` seconds per prompt of paper 002's Jacobians on a Llama-style and a GPT-NeoX-style
            layer of width d, prompts of T tokens: depth-wise (the last token's J_TT) by the
            released code's method (one backward pass per row of the identity, through the block
            on the whole prompt) vs ours (one batched sweep of the last token against its cached
            context; computed twice, as the coupling stage's two passes do), each with the SVD;
            token-wise (J_{t1 t2} for all t1 <= t2) by autograd per pair vs one sweep per output
            token; relative error vs the reference; peak RSS.
``permutation`` seconds of the paper-004 permutation tests, batched vs a per-permutation loop
            (boundary coupling: Cohen's d of 2 x 10% of d units; Spearman: 31 layer pairs), and
            of one layer's statistics (mesoscale test with 100 random partitions + boundary
            coupling).
``digests`` what checking checkpoints' sha256 digests costs a finished run (full hashes, stat checks,
            against the run's job-seconds) and a 7B checkpoint (from the sha256 GB/s measured here).
``calibration`` how often each verdict test of the claims engine errs: false "holds" and false
            "contradicted" on planted nulls at every unit count the default and the suites meet,
            and power at a one-sd effect, through the engine's own interval and rule functions;
            each claim with its test (the table in docs/claims.md).
``scale``   paper-scale rehearsal of every paper on a random 8B-shaped stack (Llama-3.1-8B's
            layer: d 4096, d_ff 14336, GQA 32/8; ``--family gpt_neox``: Pythia-6.9B's), built a
            few layers deep: seconds of each paper's heavy stages on real shapes (004: dynamics
            and topology; 002: depth-wise and token-wise Jacobians; 003: projection SVDs; 000:
            top-k subspaces), projected to one checkpoint of the paper's suite and to 3;
            ``--device cuda`` times them there; the matrix-product rates; peak memory.
"""

import argparse

from bench.calibration import bench_calibration
from bench.digests import bench_digests
from bench.jacobians import bench_coupling, bench_jacobian
from bench.scale import PAPER_STAGES, SCALE_STAGES, SHAPES, bench_scale
from bench.jobs import bench_jobs
from bench.topology import bench_permutation, bench_topology
from bench.toy import bench_toy
from bench.weights import MEMORY_SHAPES, bench_continuity, bench_e2e, bench_memory, bench_svd


def _parser():
    """The command line: one subcommand per benchmark, with its sizes."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what")
    svd = sub.add_parser("svd")
    svd.add_argument("--dims", type=int, nargs="+", default=[1024, 2048])
    svd.add_argument("--k", type=int, default=10)
    svd.add_argument("--threads", type=int, default=None)
    mem = sub.add_parser("memory")
    mem.add_argument("--family", choices=sorted(MEMORY_SHAPES), default="gpt_neox",
                     help="gemma3_text: Gemma-3-12B's decoder shape (d 3840, d_ff 15360, 16 x 256 heads)")
    mem.add_argument("--d-model", type=int, default=None, help="default: the family's")
    mem.add_argument("--n-layers", type=int, default=24)
    mem.add_argument("--d-ff", type=int, default=None, help="default: the family's")
    cont = sub.add_parser("continuity")
    cont.add_argument("--d-model", type=int, default=4096)
    cont.add_argument("--n-layers", type=int, default=3, help="layers written and analysed (projected to --full-layers)")
    cont.add_argument("--d-ff", type=int, default=14336)
    cont.add_argument("--full-layers", type=int, default=32)
    cont.add_argument("--threads", type=int, default=2)
    cont.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    toy = sub.add_parser("toy")
    toy.add_argument("--cores", type=int, default=2)
    toy.add_argument("--steps", type=int, default=938, help="Adam steps per run of the grid (the default's)")
    toy.add_argument("--no-grid", action="store_true", help="only the in-process step timings")
    e2e = sub.add_parser("e2e")
    e2e.add_argument("--cores", type=int, default=2)
    jobs = sub.add_parser("jobs")
    jobs.add_argument("--benchmarks", default="benchmarks", help="the run's benchmarks/ directory")
    jobs.add_argument("--fixed-from", help="benchmarks/ of a run of tests/configs/tiny.yaml: each rule's fixed cost per job")
    jac = sub.add_parser("jacobian")
    jac.add_argument("--dims", type=int, nargs="+", default=[256, 512, 1024])
    jac.add_argument("--samples", type=int, default=64)
    jac.add_argument("--styles", nargs="+", choices=["llama", "gpt_neox"], default=["llama", "gpt_neox"])
    jac.add_argument("--threads", type=int, default=None)
    jac.add_argument("--quick", action="store_true", help="one sample for the paper's method, two for the others")
    top = sub.add_parser("topology")
    top.add_argument("--dims", type=int, nargs="+", default=[576, 1024, 2048, 4096])
    top.add_argument("--samples", type=int, default=1000)
    top.add_argument("--k", type=int, default=10)
    top.add_argument("--threads", type=int, default=None)
    cpl = sub.add_parser("coupling")
    cpl.add_argument("--dims", type=int, nargs="+", default=[256, 512, 1024])
    cpl.add_argument("--tokens", type=int, nargs="+", default=[8, 32])
    cpl.add_argument("--styles", nargs="+", choices=["llama", "gpt_neox"], default=["llama", "gpt_neox"])
    cpl.add_argument("--threads", type=int, default=None)
    cpl.add_argument("--released-rows", type=int, default=128, help="rows of the released loop timed (scaled to d)")
    scale = sub.add_parser("scale", help="paper-scale rehearsal of every paper on an 8B-shaped stack")
    scale.add_argument("--family", choices=sorted(SHAPES), default="llama",
                       help="llama: Llama-3.1-8B's layer; gpt_neox: Pythia-6.9B's")
    scale.add_argument("--d-model", type=int, default=None, help="default: the family's")
    scale.add_argument("--d-ff", type=int, default=None, help="default: the family's")
    scale.add_argument("--heads", type=int, nargs=2, default=None, metavar=("Q", "KV"), help="default: the family's")
    scale.add_argument("--layers", type=int, default=2, help="layers built and timed")
    scale.add_argument("--samples", type=int, default=2, help="paper 004's samples timed")
    scale.add_argument("--tokens", type=int, default=256, help="tokens per paper-004 sample")
    scale.add_argument("--prompt-tokens", type=int, default=64, help="tokens per paper-002 prompt")
    scale.add_argument("--full-layers", type=int, default=32)
    scale.add_argument("--full-samples", type=int, default=1000)
    scale.add_argument("--checkpoints", type=int, default=3)
    scale.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    scale.add_argument("--threads", type=int, default=None)
    scale.add_argument("--workers", type=int, default=1, help="Schur-form processes (dynamics.schur.workers)")
    scale.add_argument("--papers", nargs="+", choices=sorted(PAPER_STAGES), default=sorted(PAPER_STAGES))
    scale.add_argument("--stages", nargs="+", choices=SCALE_STAGES, default=None, help="default: the papers' stages")
    cal = sub.add_parser("calibration", help="false-decision rates of the claims' verdicts on planted nulls")
    cal.add_argument("--draws", type=int, default=2000)
    cal.add_argument("--confidence", type=float, default=0.95)
    dig = sub.add_parser("digests")
    dig.add_argument("--run", default=".", help="a finished run's working directory")
    dig.add_argument("--seconds", type=float, default=None, help="the run's wall time, to compare with")
    perm = sub.add_parser("permutation")
    perm.add_argument("--sizes", type=int, nargs="+", default=[576, 1024, 4096])
    perm.add_argument("--n-permutations", type=int, default=5000)
    perm.add_argument("--repeat", type=int, default=3)
    perm.add_argument("--communities", type=int, default=32)
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.what in (None, "svd"):
        bench_svd(**({} if args.what is None else {"dims": args.dims, "k": args.k, "threads": args.threads}))
    if args.what in (None, "memory"):
        bench_memory(**({} if args.what is None else {"d_model": args.d_model, "n_layers": args.n_layers,
                                                       "d_ff": args.d_ff, "family": args.family}))
    if args.what == "continuity":
        bench_continuity(d_model=args.d_model, n_layers=args.n_layers, d_ff=args.d_ff, full_layers=args.full_layers,
                         threads=args.threads, device=args.device)
    if args.what == "toy":
        bench_toy(cores=args.cores, steps=args.steps, grid=not args.no_grid)
    if args.what == "e2e":
        bench_e2e(args.cores)
    if args.what == "jobs":
        bench_jobs(args.benchmarks, fixed_from=args.fixed_from)
    if args.what == "jacobian":
        bench_jacobian(dims=args.dims, samples=args.samples, styles=args.styles, threads=args.threads,
                       quick=args.quick)
    if args.what == "topology":
        bench_topology(dims=args.dims, samples=args.samples, k=args.k, threads=args.threads)
    if args.what == "coupling":
        bench_coupling(dims=args.dims, tokens=args.tokens, styles=args.styles, threads=args.threads,
                       released_rows=args.released_rows)
    if args.what == "scale":
        stages = args.stages or [stage for paper in args.papers for stage in PAPER_STAGES[paper]]
        n_heads, n_kv_heads = args.heads or (None, None)
        bench_scale(family=args.family, d_model=args.d_model, d_ff=args.d_ff, n_heads=n_heads, n_kv_heads=n_kv_heads,
                    layers=args.layers, samples=args.samples, tokens=args.tokens, prompt_tokens=args.prompt_tokens,
                    full_layers=args.full_layers, full_samples=args.full_samples, checkpoints=args.checkpoints,
                    device=args.device, threads=args.threads, stages=stages, workers=args.workers)
    if args.what == "calibration":
        bench_calibration(draws=args.draws, confidence=args.confidence)
    if args.what == "digests":
        bench_digests(args.run, args.seconds)
    if args.what == "permutation":
        bench_permutation(sizes=args.sizes, n_permutations=args.n_permutations, repeat=args.repeat,
                          communities=args.communities)


if __name__ == "__main__":
    main()
