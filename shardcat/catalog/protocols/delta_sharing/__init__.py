"""The open Delta Sharing protocol server (delta-io/delta-sharing PROTOCOL.md) beside the UC API.

A recipient's bearer token (catalog/features/sharing.py issues and rotates them) reads the shares granted to
it: `server.py` answers the protocol's endpoints under `/api/2.1/delta-sharing/metastores/{id}`;
`tables.py` reads a shared table's Delta log at a version (published commits and the catalog's
ratified ones); `predicates.py` skips files by the recipient's predicate hints and the share's
partition filters; `files.py` hands files out by pre-signed URL (HMAC-signed URLs on shardcat for
file://, S3 pre-signing for s3://); `activation.py` gives a recipient its profile once.
"""
