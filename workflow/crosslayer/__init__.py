"""crosslayer: cross-layer geometry of transformer language models.

Submodules are imported explicitly (``from crosslayer.linalg.subspace import ...``) so that
each workflow step only pulls the dependencies it needs.
"""

__version__ = "0.1.0"
