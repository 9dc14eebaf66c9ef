from _setup import start

start(snakemake)

from pathlib import Path

import numpy as np
from tqdm import tqdm

from crosslayer.graphs import write_graph
from crosslayer.topology import snapshot_graphs

with np.load(snakemake.input.activations) as npz:
    acts = npz["acts"]
graphs = snapshot_graphs(acts, k=snakemake.params.k, progress=lambda s: tqdm(s, desc="snapshots", unit="graph"))
out = Path(snakemake.output.graphs)
out.mkdir(parents=True)
for index, graph in enumerate(graphs):
    write_graph(graph, out / f"snapshot{index:03d}.graphml.gz")  # igraph.Graph.Read_GraphMLz opens these
