"""The `shardcat` command-line client: everyday catalog objects over the Unity Catalog REST API."""

from .http import Client, ClientError, ServerError

__all__ = ["Client", "ClientError", "ServerError"]
