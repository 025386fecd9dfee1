"""What an Idempotency-Key keeps of an answer (catalog/protocols/iceberg/idempotency.py `stored`): everything
but the storage credentials, so no vended key is written to the database."""

from __future__ import annotations

from shardcat.catalog.protocols.iceberg.idempotency import stored


def test_credentials_are_left_out_and_the_rest_kept():
    answer = {"metadata-location": "s3://b/t/metadata/1.json", "metadata": {"format-version": 2},
              "config": {"s3.access-key-id": "AKIA", "s3.secret-access-key": "secret", "s3.session-token": "tok"},
              "storage-credentials": [{"prefix": "s3://b/t", "config": {"s3.secret-access-key": "secret"}}],
              "status": "completed", "plan-id": "p"}
    kept = stored(answer)
    assert "secret" not in str(kept) and "AKIA" not in str(kept) and "tok" not in str(kept)
    assert kept == {"metadata-location": "s3://b/t/metadata/1.json", "metadata": {"format-version": 2},
                    "config": {}, "storage-credentials": [], "status": "completed", "plan-id": "p"}
    assert stored(None) is None and stored({"updated": ["a"]}) == {"updated": ["a"]}
