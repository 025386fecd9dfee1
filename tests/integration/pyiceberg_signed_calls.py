"""Run pyiceberg (its REST catalog and its own S3 FileIO) against a shardcat table with remote signing, and print
what each step did as JSON.

test_iceberg_signing_fileio.py runs this in a child process, in a virtual environment of its own holding
pyiceberg 0.12 with s3fs (which pins fsspec, botocore and aiohttp to other versions than the suite's). The child has
no S3 keys: the table's config (loadTable, asked with X-Iceberg-Access-Delegation: remote-signing) names
pyiceberg's FsspecFileIO and the catalog's signer, and every S3 request is signed by the catalog.

    python pyiceberg_signed_calls.py <iceberg uri> <token> <warehouse> <namespace.table> <json list of steps>

Steps: {"action": "append", "ids": [...]}, {"action": "read"}, {"action": "get", "path": url},
{"action": "put", "path": url}. Prints one JSON line: a list with, per step, {"ok": result} or
{"failed": exception type, "message": its first line, "s3": what the store answered}: for a failure from S3, the
botocore error's operation, code and status, and the last requests sent to the store (method, URL, whether they
carried a signature, the answer's status), so a failure says which request and why.
"""

from __future__ import annotations

import json
import sys
from collections import deque

# The last requests sent to the store (method, url, signed, status), every thread's, in the order sent.
SENT: deque = deque(maxlen=12)


def record_requests() -> None:
    """Note each request aiobotocore (s3fs's client) sends and the status it got, whichever client sends it."""
    from aiobotocore.endpoint import AioEndpoint

    send = AioEndpoint._send

    async def noted(self, request):
        entry = {"method": request.method, "url": request.url, "signed": "Authorization" in request.headers}
        SENT.append(entry)
        response = await send(self, request)
        entry["status"] = response.status_code
        return response

    AioEndpoint._send = noted


def one_filesystem_per_thread() -> None:
    """Give each of pyiceberg's threads an s3fs filesystem (and aiobotocore client) of its own, as pyiceberg's
    per-thread FileIO cache means to: fsspec otherwise hands every thread one shared instance, and pyiceberg 0.12
    (its io/fsspec.py `_s3`) installs the signer on that shared client by unregistering it and then registering
    it again, each time a thread first uses a FileIO (after every load_table). A request another thread sends in
    between goes out unsigned (the signature version is UNSIGNED; the signer adds the signature) and the store
    answers 403: as an s3fs PermissionError 'Forbidden' for a HEAD. (apache/iceberg-python issue 3896, open.)"""
    import fsspec.config

    fsspec.config.conf.setdefault("s3", {})["skip_instance_cache"] = True


def s3_error(e: BaseException) -> dict | None:
    """The botocore error behind an s3fs exception (s3fs raises its own, with the ClientError as cause or
    context): its operation, code and status, and the requests just sent."""
    from botocore.exceptions import ClientError

    seen = e
    while seen is not None and not isinstance(seen, ClientError):
        seen = seen.__cause__ or seen.__context__
    if seen is None:
        return None
    return {"operation": seen.operation_name, "code": seen.response.get("Error", {}).get("Code"),
            "status": seen.response.get("ResponseMetadata", {}).get("HTTPStatusCode"), "sent": list(SENT)}


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

    record_requests()
    one_filesystem_per_thread()
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
            out.append({"failed": type(e).__name__, "message": (str(e).splitlines() or [""])[0][:500],
                        "s3": s3_error(e)})
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5]))))
