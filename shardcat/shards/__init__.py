"""The shard core: a shard owns metastores and keeps each current at a known version (shard.py), with
the followers kept current beside it (followers.py) and its storage-path lookups (locations.py)."""
