"""shardcat: a sharded, in-memory lakehouse catalog that speaks the Unity Catalog REST API."""

__version__ = "0.1.0"
