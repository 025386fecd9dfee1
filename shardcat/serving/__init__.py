"""The apps a shard serves: its aiohttp app (app.py), the fast HTTP/1.1 front before it (front.py),
the Ray actor that hosts both (actor.py), and the one-process app without a router (single.py)."""
