from _setup import start

start(snakemake)

from pathlib import Path

import numpy as np
from tqdm import tqdm

from crosslayer.dynamics.topology import snapshot_graphs
from crosslayer.npz import open_npz
from crosslayer.stats.graphs import write_graph

with open_npz(snakemake.input.activations) as npz:
    acts = npz["acts"]
if np.isnan(acts).all(axis=(0, 2)).any():  # a hub model of a family without an adapter (generic path)
    model = snakemake.wildcards.model
    raise ValueError(f"model '{model}': its family has no adapter here, so the pre-MLP residual stream the topology "
                     f"stages need was not recorded; leave topology out of models.{model}.analyses")
graphs = snapshot_graphs(acts, k=snakemake.params.k, progress=lambda s: tqdm(s, desc="snapshots", unit="graph"))
out = Path(snakemake.output.graphs)
out.mkdir(parents=True)
for index, graph in enumerate(graphs):
    write_graph(graph, out / f"snapshot{index:03d}.graphml.gz")  # igraph.Graph.Read_GraphMLz opens these
