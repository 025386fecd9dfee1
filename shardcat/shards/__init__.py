"""The shard core: a shard owns metastores and keeps each one current at a known version (shard.py), with followers kept current beside it (followers.py) and storage-path lookups (locations.py)."""
