"""Registered models and their versions, model aliases, and model-version storage credentials.

A registered model is a schema-level asset whose storage is always managed:
`<nearest storage root>/models/<model_id>`. Its versions are assets of type
"model_version", children of the model, named by their number (full name
"<catalog>.<schema>.<model>.<n>"). Numbers start at 1 and are never reused: the
model keeps the highest number it ever gave out. A version starts as
PENDING_REGISTRATION with storage `<model storage>/versions/<version_id>` (inside the
model's own path, which the model owns in the storage trie) and becomes READY when
finalized. Aliases ("champion" -> 3) live on the model and move or vanish with
their version. Every write is one `Shard.write` (one transaction, one version bump).
"""

from __future__ import annotations

import dataclasses

import re
import uuid

from ...auth import Caller
from ...entities.urls import join_url
from ...entities.asset import Asset
from ...entities.names import check_name, split_full_name
from ...entities.types import MODEL_VERSION, REGISTERED_MODEL
from ...errors import CatalogError, invalid, not_found
from ...governance.authorize import authorizer, require_data_access
from ...store.writes import WriteTx
from ...entities.values import now_ms
from .assets import check_free, managed_root, render
from .crud import TypeService
from ...web.kit import flag, json_body, ok
from ...web.routes import Handler, ShardServing
from ...web.paging import decode_page_token, encode_page_token, page_size
from ...shards.shard import MetastoreState, Shard
from ...governance import audit
from ...governance.vending import vend

PENDING, READY = "PENDING_REGISTRATION", "READY"
OPERATIONS = ("READ_MODEL_VERSION", "READ_WRITE_MODEL_VERSION")
# Kept on the model's stored info but not part of RegisteredModelInfo on the wire.
_MAX_VERSION = "max_version_number"
# MLflow's alias rule: letters, digits, '_' and '-', and not a name MLflow reserves ("latest", "v<n>").
_ALIAS = re.compile(r"[A-Za-z0-9_-]{1,255}")


def render_model(out: dict) -> dict:
    out.pop(_MAX_VERSION, None)
    out.setdefault("aliases", [])
    return out


def render_version(version: Asset, model: Asset | None = None) -> dict:
    catalog_name, schema_name, model_name, number = version.full_name.split(".")
    out = dict(version.info)
    out.update(id=version.id, catalog_name=catalog_name, schema_name=schema_name, model_name=model_name,
               version=int(number))
    if model is not None:
        out["aliases"] = [a for a in model.info.get("aliases", []) if a["version_num"] == int(number)]
    return out


_MAX_BIGINT = (1 << 63) - 1     # versions are numbered in PostgreSQL bigints


def parse_version(value) -> int:
    """A version number from a path or a body: a positive integer."""
    if isinstance(value, str) and value.isdecimal() and len(value) <= 19:    # int() of thousands of digits fails
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= _MAX_BIGINT:
        raise invalid(f"A model version must be a positive integer, got {value!r:.40}.")
    return value


def check_alias(alias) -> str:
    if not isinstance(alias, str) or not _ALIAS.fullmatch(alias):
        raise invalid(f"Invalid alias {alias!r:.80}: use 1-255 letters, digits, '_' or '-'.")
    alias = alias.lower()
    if alias == "latest" or re.fullmatch(r"v\d+", alias):
        raise invalid(f"The alias '{alias}' is reserved: 'latest' and 'v<number>' name versions already.")
    return alias


class RegisteredModels(TypeService):
    """The models themselves (the generic operations); their versions and aliases are ModelService's."""

    def __init__(self, shard: Shard):
        super().__init__(shard, REGISTERED_MODEL)

    async def on_create(self, tx, state, asset, schema, flags):
        return await create_model(tx, state, asset, schema)


async def create_model(tx: WriteTx, state: MetastoreState, asset: Asset, schema: Asset) -> Asset:
    location = join_url(await managed_root(tx, state, schema), "models", asset.id)
    check_free(state, location, "storage_location", inside_managed=True)
    info = {**asset.info, "storage_location": location, "aliases": [], _MAX_VERSION: 0}
    return dataclasses.replace(asset, info=info, storage_path=location)


class ModelService:
    """The /models endpoints, over the generic CRUD for the models themselves."""

    def __init__(self, catalogs):
        self.catalogs = catalogs
        self.shard = catalogs.shard

    # ---- registered models ------------------------------------------------

    async def create_model(self, caller: Caller, body: dict) -> dict:
        return render_model(await self.catalogs.create(caller, "registered_model", body))

    async def get_model(self, caller: Caller, full_name: str) -> dict:
        return render_model(await self.catalogs.get(caller, "registered_model", full_name))

    async def update_model(self, caller: Caller, full_name: str, body: dict) -> dict:
        return render_model(await self.catalogs.update(caller, "registered_model", full_name, body))

    async def delete_model(self, caller: Caller, full_name: str, force: bool) -> None:
        await self.catalogs.delete(caller, "registered_model", full_name, force)

    async def list_models(self, caller: Caller, catalog_name: str | None, schema_name: str | None,
                          max_results=None, page_token: str | None = None) -> dict:
        """Models in one schema, in one catalog, or in the whole metastore (both parents optional)."""
        if catalog_name and schema_name:
            out = await self.catalogs.list(caller, "registered_model", f"{catalog_name}.{schema_name}",
                                           max_results, page_token)
            out["registered_models"] = [render_model(m) for m in out["registered_models"]]
            return out
        if schema_name:
            raise invalid("schema_name needs catalog_name: list models with both, catalog_name alone, or neither.")
        limit = page_size(max_results)
        after = decode_page_token(page_token)
        ms, v = caller.metastore(), caller.min_version
        if catalog_name:
            name = check_name(catalog_name, "catalog")
            catalog = await self.shard.lookup(ms, "catalog", name, v)
            # a catalog the caller may not see answers as a missing one (not as an empty list)
            if catalog is None or not (await authorizer(self.shard, caller)).sees("catalog", catalog):
                raise not_found(f"Catalog '{catalog_name}' does not exist.")
            catalogs = [catalog]
        else:
            catalogs = await self._all_children(ms, ms, "catalog", v)
        models = []
        for catalog in catalogs:
            for schema in await self._all_children(ms, catalog.id, "schema", v):
                models += await self._all_children(ms, schema.id, "registered_model", v)
        models = (await authorizer(self.shard, caller)).filter_any("registered_model", models)
        models = sorted((m for m in models if m.full_name > after), key=lambda m: m.full_name)
        page = models[:limit]
        out = {"registered_models": [render_model(render(m)) for m in page]}
        if len(models) > limit:
            out["next_page_token"] = encode_page_token(page[-1].full_name)
        return out

    async def _all_children(self, ms: str, parent_id: str, namespace: str, min_version: int) -> list[Asset]:
        out, after = [], ""
        while True:
            page = await self.shard.children(ms, parent_id, namespace, after=after, limit=1000,
                                             min_version=min_version)
            out += page
            if len(page) < 1000:
                return out
            after = page[-1].name

    # ---- model versions ---------------------------------------------------

    async def _model(self, caller: Caller, full_name: str) -> Asset:
        """The model, if the caller may read it (its versions are governed by the model's privileges)."""
        names = split_full_name(full_name, 3, "registered model")
        model = await self.shard.lookup(caller.metastore(), "registered_model", ".".join(names), caller.min_version)
        missing = not_found(f"Registered model '{full_name}' does not exist.")
        if model is None:
            raise missing
        (await authorizer(self.shard, caller)).require_or_missing("registered_model", "read", model, missing)
        return model

    async def _version(self, caller: Caller, full_name: str, version) -> tuple[Asset, Asset]:
        number = parse_version(version)
        model = await self._model(caller, full_name)
        asset = await self.shard.lookup(caller.metastore(), "model_version", f"{model.full_name}.{number}",
                                        caller.min_version)
        if asset is None:
            raise not_found(f"Model version '{model.full_name}' version {number} does not exist.")
        return model, asset

    @staticmethod
    async def _model_in_tx(tx: WriteTx, full_name: str, authz) -> Asset:
        """The model, if the caller may change it or its versions (`authz`: governance/authorize.py)."""
        model = await tx.get("registered_model", full_name)
        missing = not_found(f"Registered model '{full_name}' does not exist.")
        if model is None:
            raise missing
        authz.require_or_missing("registered_model", "update", model, missing)
        return model

    @staticmethod
    async def _version_in_tx(tx: WriteTx, model: Asset, number: int) -> Asset:
        version = await tx.get("model_version", f"{model.full_name}.{number}")
        if version is None:
            raise not_found(f"Model version '{model.full_name}' version {number} does not exist.")
        return version

    async def create_version(self, caller: Caller, body: dict) -> dict:
        fields = MODEL_VERSION.check_create(body)
        names = [check_name(fields.pop(f), f.removesuffix("_name")) for f in ("catalog_name", "schema_name")]
        model_full = ".".join([*names, check_name(fields.pop("model_name"), "registered model")])
        if not fields["source"].strip():
            raise invalid("Field 'source' must not be empty: it is where the model's files come from.")
        now = now_ms()
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            model = await self._model_in_tx(tx, model_full, authz)
            number = model.info.get(_MAX_VERSION, 0) + 1
            version_id = str(uuid.uuid4())
            location = join_url(model.info["storage_location"], "versions", version_id)
            info = {**fields, "status": PENDING, "storage_location": location, "created_at": now,
                    "created_by": caller.name, "updated_at": now, "updated_by": caller.name}
            version = Asset(id=version_id, metastore_id=state.id, type="model_version", namespace="model_version",
                            parent_id=model.id, name=str(number), full_name=f"{model_full}.{number}",
                            storage_path=None, info=info)   # the model owns the path its versions live under
            model = await tx.put(dataclasses.replace(model, info={**model.info, _MAX_VERSION: number}))
            return render_version(await tx.put(version), model)

        return await self.shard.write(caller.metastore(), write)

    async def get_version(self, caller: Caller, full_name: str, version) -> dict:
        model, asset = await self._version(caller, full_name, version)
        return render_version(asset, model)

    async def list_versions(self, caller: Caller, full_name: str, max_results=None,
                            page_token: str | None = None) -> dict:
        limit = page_size(max_results)
        after = decode_page_token(page_token)
        if after and not after.isdecimal():
            raise invalid(f"Invalid page_token '{page_token:.40}': use the next_page_token of a previous response.")
        model = await self._model(caller, full_name)
        versions = await self._all_children(caller.metastore(), model.id, "model_version", caller.min_version)
        versions = sorted((v for v in versions if int(v.name) > int(after or 0)), key=lambda v: int(v.name))
        page = versions[:limit]
        out = {"model_versions": [render_version(v, model) for v in page]}
        if len(versions) > limit:
            out["next_page_token"] = encode_page_token(page[-1].name)
        return out

    async def _change_version(self, caller: Caller, full_name: str, version, change) -> dict:
        """Read-modify-write one version in a transaction: change(model, version) -> new info."""
        number = parse_version(version)
        model_full = ".".join(split_full_name(full_name, 3, "registered model"))
        now = now_ms()
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            model = await self._model_in_tx(tx, model_full, authz)
            asset = await self._version_in_tx(tx, model, number)
            info = {**change(asset), "updated_at": now, "updated_by": caller.name}
            return render_version(await tx.put(dataclasses.replace(asset, info=info)), model)

        return await self.shard.write(caller.metastore(), write)

    async def update_version(self, caller: Caller, full_name: str, version, body: dict) -> dict:
        fields = MODEL_VERSION.check_update(body)
        return await self._change_version(caller, full_name, version, lambda v: {**v.info, **fields})

    async def finalize_version(self, caller: Caller, full_name: str, version, body: dict) -> dict:
        number = parse_version(version)
        # The body repeats the path (FinalizeModelVersion); if it says something else, refuse.
        if body.get("version") is not None and parse_version(body["version"]) != number:
            raise invalid(f"The body's version {body['version']!r:.20} differs from the path's {number}.")
        if body.get("full_name") is not None and str(body["full_name"]).lower() != full_name.lower():
            raise invalid(f"The body's full_name {body['full_name']!r:.80} differs from the path's '{full_name}'.")

        def finalize(v: Asset) -> dict:
            if v.info.get("status") != PENDING:
                raise invalid(f"Model version '{v.full_name.rsplit('.', 1)[0]}' version {number} is "
                              f"{v.info.get('status')}, not {PENDING}: only a pending version can be finalized.")
            return {**v.info, "status": READY}

        return await self._change_version(caller, full_name, number, finalize)

    async def delete_version(self, caller: Caller, full_name: str, version) -> None:
        number = parse_version(version)
        model_full = ".".join(split_full_name(full_name, 3, "registered model"))
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            model = await self._model_in_tx(tx, model_full, authz)
            asset = await self._version_in_tx(tx, model, number)
            await tx.delete([asset])
            aliases = model.info.get("aliases", [])
            if any(a["version_num"] == number for a in aliases):   # its aliases go with it
                kept = [a for a in aliases if a["version_num"] != number]
                await tx.put(dataclasses.replace(model, info={**model.info, "aliases": kept}))

        await self.shard.write(caller.metastore(), write)

    # ---- aliases ----------------------------------------------------------

    async def set_alias(self, caller: Caller, full_name: str, alias: str, body: dict) -> dict:
        alias = check_alias(alias)
        if body.get("version_num") is None:
            raise invalid("Missing required field 'version_num' to set an alias.")
        number = parse_version(body["version_num"])
        model_full = ".".join(split_full_name(full_name, 3, "registered model"))
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            model = await self._model_in_tx(tx, model_full, authz)
            await self._version_in_tx(tx, model, number)
            aliases = [a for a in model.info.get("aliases", []) if a["alias_name"] != alias]
            aliases = sorted([*aliases, {"alias_name": alias, "version_num": number}], key=lambda a: a["alias_name"])
            await tx.put(dataclasses.replace(model, info={**model.info, "aliases": aliases}))
            return {"alias_name": alias, "version_num": number}

        return await self.shard.write(caller.metastore(), write)

    async def delete_alias(self, caller: Caller, full_name: str, alias: str) -> None:
        alias = check_alias(alias)
        model_full = ".".join(split_full_name(full_name, 3, "registered model"))
        authz = await authorizer(self.shard, caller)

        async def write(tx: WriteTx, state: MetastoreState):
            model = await self._model_in_tx(tx, model_full, authz)
            aliases = model.info.get("aliases", [])
            kept = [a for a in aliases if a["alias_name"] != alias]
            if len(kept) == len(aliases):
                raise not_found(f"Registered model '{model_full}' has no alias '{alias}'.")
            await tx.put(dataclasses.replace(model, info={**model.info, "aliases": kept}))

        await self.shard.write(caller.metastore(), write)

    async def get_by_alias(self, caller: Caller, full_name: str, alias: str) -> dict:
        alias = check_alias(alias)
        model = await self._model(caller, full_name)
        number = next((a["version_num"] for a in model.info.get("aliases", []) if a["alias_name"] == alias), None)
        if number is None:
            raise not_found(f"Registered model '{model.full_name}' has no alias '{alias}'.")
        return await self.get_version(caller, model.full_name, number)

    # ---- temporary credentials for a version's files ----------------------

    async def temporary_credentials(self, caller: Caller, body: dict) -> dict:
        """POST /temporary-model-version-credentials, in the TemporaryCredentials shape.

        For file:// storage there is no secret to hand out: the answer names the url and an
        expiry only. Writing (READ_WRITE_MODEL_VERSION) is allowed while the version is pending.
        """
        for key in ("catalog_name", "schema_name", "model_name", "operation"):
            if body.get(key) is None:
                raise invalid(f"Missing required field '{key}' to get model version credentials.")
            if not isinstance(body[key], str):
                raise invalid(f"Field '{key}' must be a string.")
        if body.get("version") is None:
            raise invalid("Missing required field 'version' to get model version credentials.")
        operation = body["operation"]
        if operation not in OPERATIONS:
            raise invalid(f"Unknown operation '{operation:.60}'; expected one of {', '.join(OPERATIONS)}.")
        full_name = f"{body['catalog_name']}.{body['schema_name']}.{body['model_name']}"
        _, version = await self._version(caller, full_name, body["version"])
        if operation == "READ_WRITE_MODEL_VERSION" and version.info.get("status") != PENDING:
            raise CatalogError("FAILED_PRECONDITION",
                               f"Model version '{full_name}' version {version.name} is {version.info.get('status')}: "
                               "its files can be written only while it is PENDING_REGISTRATION.")
        url = version.info["storage_location"]
        # Authorize first, then vend: file:// gets no secret, s3:// STS keys scoped to the version's files.
        audit.annotate("MODEL_VERSION", version.full_name, version.id)
        write = operation == "READ_WRITE_MODEL_VERSION"
        await require_data_access(self.shard, caller, version, write=write)
        return await vend(self.shard, caller, url, write=write)


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths):
    registered models, versions, aliases and model-version credentials."""
    models = ModelService(serving.catalogs)

    def handler(call) -> Handler:
        """call(caller, path parameters, request, body) -> the answer's JSON."""
        async def handle(request):
            body = await json_body(request) if request.method in ("POST", "PUT", "PATCH") else {}
            return ok(await call(request["caller"], request.match_info, request, body))
        return handle

    def page(r):
        return r.query.get("max_results"), r.query.get("page_token")

    return {name: handler(call) for name, call in {
        "createRegisteredModel": lambda c, m, r, b: models.create_model(c, b),
        "listRegisteredModels": lambda c, m, r, b: models.list_models(
            c, r.query.get("catalog_name") or None, r.query.get("schema_name") or None, *page(r)),
        "getRegisteredModel": lambda c, m, r, b: models.get_model(c, m["full_name"]),
        "updateRegisteredModel": lambda c, m, r, b: models.update_model(c, m["full_name"], b),
        "deleteRegisteredModel": lambda c, m, r, b: models.delete_model(c, m["full_name"], flag(r, "force")),
        "createModelVersion": lambda c, m, r, b: models.create_version(c, b),
        "listModelVersions": lambda c, m, r, b: models.list_versions(c, m["full_name"], *page(r)),
        "getModelVersion": lambda c, m, r, b: models.get_version(c, m["full_name"], m["version"]),
        "updateModelVersion": lambda c, m, r, b: models.update_version(c, m["full_name"], m["version"], b),
        "deleteModelVersion": lambda c, m, r, b: models.delete_version(c, m["full_name"], m["version"]),
        "finalizeModelVersion": lambda c, m, r, b: models.finalize_version(c, m["full_name"], m["version"], b),
        "getModelVersionByAlias": lambda c, m, r, b: models.get_by_alias(c, m["full_name"], m["alias"]),
        "setRegisteredModelAlias": lambda c, m, r, b: models.set_alias(c, m["full_name"], m["alias"], b),
        "deleteRegisteredModelAlias": lambda c, m, r, b: models.delete_alias(c, m["full_name"], m["alias"]),
        # the other temporary-credential endpoints are catalog/features/credentials.py's
        "generateTemporaryModelVersionCredentials": lambda c, m, r, b: models.temporary_credentials(c, b),
    }.items()}
