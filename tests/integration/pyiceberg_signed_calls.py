"""Run pyiceberg (its REST catalog and its own S3 FileIO) against a shardcat table with remote signing, and print
what each step did as JSON.

test_iceberg_signing_fileio.py runs this in a child process, in a virtual environment of its own holding
pyiceberg 0.12 with s3fs (which pins fsspec, botocore and aiohttp to other versions than the suite's). The child has
no S3 keys: the table's config (loadTable, asked with X-Iceberg-Access-Delegation: remote-signing) names
pyiceberg's FsspecFileIO and the catalog's signer, and every S3 request is signed by the catalog.

    python pyiceberg_signed_calls.py <iceberg uri> <token> <warehouse> <namespace.table> <json list of steps>

Steps: {"action": "append", "ids": [...]}, {"action": "read"}, {"action": "get", "path": url},
{"action": "put", "path": url}. Prints one JSON line: a list with, per step, {"ok": result} or
{"failed": exception type, "message": its first line}.
"""

from __future__ import annotations

import json
import sys


def step(table, action: dict):
    import pyarrow as pa

    if action["action"] == "append":
        table.append(pa.table({"id": pa.array(action["ids"], pa.int64())}))
        return {"snapshot": table.current_snapshot().snapshot_id,
                "files": sorted(t.file.file_path for t in table.scan().plan_files())}
    if action["action"] == "read":
        return sorted(table.scan().to_arrow()["id"].to_pylist())
    if action["action"] == "get":
        with table.io.new_input(action["path"]).open() as f:
            return len(f.read())
    if action["action"] == "put":
        with table.io.new_output(action["path"]).create(overwrite=True) as f:
            f.write(b"written through the signer")
        return True
    raise ValueError(f"unknown action {action['action']!r}")


def main(uri: str, token: str, warehouse: str, name: str, steps: list[dict]) -> list[dict]:
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("shardcat", type="rest", uri=uri, token=token, warehouse=warehouse,
                           **{"header.X-Iceberg-Access-Delegation": "remote-signing"})
    table = catalog.load_table(name)
    keys = sorted(k for k in table.io.properties if k.endswith(("access-key-id", "secret-access-key", "session-token")))
    out = [{"ok": {"io": type(table.io).__name__, "keys": keys,
                   "signing": table.io.properties.get("s3.remote-signing-enabled")}}]
    for action in steps:
        try:
            out.append({"ok": step(table, action)})
            table = catalog.load_table(name)
        except Exception as e:          # the step's failure is the answer (e.g. pyiceberg's SignError)
            out.append({"failed": type(e).__name__, "message": (str(e).splitlines() or [""])[0][:500]})
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5]))))
