"""First-start set-up: the admin principal and its token file, and the default metastore."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from ..auth import hash_token, new_token
from ..entities.urls import join_url, normalize_url
from ..store.db import Store
from ..entities.values import now_ms

ADMIN = "admin"
DEFAULT_WORKSPACE = 1
DEFAULT_METASTORE = "default"


async def ensure_admin_token(store: Store, data_dir: Path) -> Path:
    """Make sure `<data-dir>/admin-token` holds a live token of the admin principal (mode 0600)."""
    path = data_dir / "admin-token"
    if path.exists():
        found = await store.principal_for_token(hash_token(path.read_text().strip()))
        if found and found[0].is_account_admin:
            return path
    admin = await store.create_principal(ADMIN, "user", is_account_admin=True)
    token = new_token()
    await store.add_token(admin.id, hash_token(token), DEFAULT_WORKSPACE, comment="created at first start")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return path


async def ensure_default_metastore(store: Store, data_dir: Path) -> str:
    """The metastore of the default workspace, created with its storage under the data dir if missing."""
    assignment = await store.assignment(DEFAULT_WORKSPACE)
    if assignment:
        return assignment[0]
    existing = {m.name: m for m in await store.list_metastores()}
    if DEFAULT_METASTORE in existing:
        metastore_id = existing[DEFAULT_METASTORE].id
    else:
        metastore_id = str(uuid.uuid4())
        storage = data_dir / "storage"
        storage.mkdir(parents=True, exist_ok=True)
        now = now_ms()
        info = {"storage_root": join_url(normalize_url(str(storage.resolve())), metastore_id), "owner": ADMIN,
                "created_at": now, "created_by": ADMIN, "updated_at": now, "updated_by": ADMIN,
                "delta_sharing_scope": "INTERNAL", "privilege_model_version": "1.0"}
        await store.create_metastore(metastore_id, DEFAULT_METASTORE, info)
    await store.assign(DEFAULT_WORKSPACE, metastore_id, None)
    return metastore_id
