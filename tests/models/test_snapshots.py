"""Snapshot names (crosslayer.models.snapshots)."""

from crosslayer.models.snapshots import snapshot_name


def test_snapshot_name():
    assert snapshot_name(0) == "layer 0 pre-attention"
    assert snapshot_name(7) == "layer 3 pre-MLP"
