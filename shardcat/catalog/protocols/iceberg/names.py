"""Names in the Iceberg REST catalog: a full name that keeps the client's spelling, and a table's schema of it.
"""

from __future__ import annotations

SEPARATOR = "\x1f"             # Iceberg's namespace separator in paths (url-encoded %1F)


class Name(str):
    """A namespace's, table's or view's full name in the metastore (catalog.schema.name, lower case) that
    keeps the client's spelling: `spelled`, its namespace levels (the warehouse left out) and name as
    sent, dot-joined, as Iceberg's clients and catalogs name it in messages."""

    spelled: str

    def __new__(cls, full_name: str, spelled: str) -> "Name":
        name = super().__new__(cls, full_name)
        name.spelled = spelled
        return name


def spelled(name: str) -> str:
    """How the client named `name` (a Name); a plain full name as it is."""
    return getattr(name, "spelled", name)


def schema_of(name: str) -> Name:
    """The schema of a table's (view's) name, spelled as the client named its namespace."""
    return Name(name.rsplit(".", 1)[0], spelled(name).rsplit(".", 1)[0])
