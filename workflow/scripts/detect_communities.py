from _setup import start

start(snakemake)

from pathlib import Path

import numpy as np
from tqdm import tqdm

from crosslayer.dynamics.topology import checkpoint_communities
from crosslayer.stats.graphs import read_graph

params = snakemake.params
graphs = [read_graph(path) for path in sorted(Path(snakemake.input.graphs).glob("snapshot*.graphml.gz"))]
memberships, participation, summary = checkpoint_communities(
    graphs,
    methods=params.methods,
    seeds=params.seeds,
    resolution_pos=params.resolution_pos,
    resolution_neg=params.resolution_neg,
    rb_resolution_pos=params.rb_resolution_pos,
    rb_resolution_neg=params.rb_resolution_neg,
    progress=lambda work: tqdm(work, desc="method x snapshot", unit="partition"),
)
np.savez(snakemake.output.partitions, memberships=memberships, participation=participation,
         methods=np.array(params.methods))
summary.to_csv(snakemake.output.table, sep="\t", index=False)
