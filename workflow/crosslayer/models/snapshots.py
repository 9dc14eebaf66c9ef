"""Names of residual-stream snapshots, shared by the stages that record them (torch) and those
that only read them (graphs, statistics): snapshot ``2l`` is the input of block l (before
attention), ``2l + 1`` the residual entering its MLP."""

__all__ = ["SNAPSHOT_KINDS", "snapshot_name"]

SNAPSHOT_KINDS = ("pre-attention", "pre-MLP")


def snapshot_name(index: int) -> str:
    """Human-readable name of snapshot ``index``: ``"layer 3 pre-MLP"`` for 7."""
    return f"layer {index // 2} {SNAPSHOT_KINDS[index % 2]}"
