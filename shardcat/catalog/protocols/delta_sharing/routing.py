"""Which metastore a Delta Sharing request is for, from its path alone (a router forwards it to
that metastore's shard before anyone has checked a token): the protocol's paths name it, a
signed file URL carries it (the shard verifies the signature), an activation code begins with it."""

from __future__ import annotations

import uuid

from ....web.wire import PREFIX, SHARING_PREFIX
from .files import grant_metastore

_PROTOCOL = SHARING_PREFIX + "/metastores/"
_FILES = SHARING_PREFIX + "/files/"
_ACTIVATION = PREFIX + "/public/data_sharing_activation"


def metastore_of(path: str) -> str | None:
    if path.startswith(_PROTOCOL):
        found = path[len(_PROTOCOL):].partition("/")[0]
    elif path.startswith(_FILES):
        found = grant_metastore(path[len(_FILES):].partition("/")[0])
    elif path.startswith(_ACTIVATION):
        found = path.rsplit("/", 1)[-1].partition(".")[0]
    else:
        return None
    try:
        return str(uuid.UUID(found)) if found else None
    except ValueError:
        return None
