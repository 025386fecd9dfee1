"""Server-side scan planning: planTableScan, fetchPlanningResult, cancelPlanning and fetchScanTasks.

The catalog plans a scan of a table the caller may read (SELECT; a table with a row filter or column
masks for trusted engines only, as every read of its data), native Iceberg or UniForm (a Delta table whose
Iceberg metadata the catalog writes, features/uniform.py: planned on that metadata, brought up to its latest
Delta version first, as a load would), with pyiceberg's planner (scan.py), and
answers file scan tasks with credentials for exactly the planned files: on S3, STS session policies
naming their keys (governance/vending.py vend_objects); file:// needs none; a store reached with static
keys gets none (its keys cannot be scoped: remote signing, signing.py, serves it).

A plan that finishes within $SHARDCAT_ICEBERG_PLAN_WAIT_MS (default 30,000 ms) is answered "completed" at
once; a longer one is answered "submitted" with its plan id and goes on in the background, fetched with
fetchPlanningResult. A completed plan answers its first page of file scan tasks (scan.PAGE_TASKS) and a
plan task for each further page, fetched with fetchScanTasks. Plans live in the shard's memory for
PLAN_SECONDS, each its caller's own: another caller's plan id or plan task answers as a missing one,
and each fetch checks the caller's right to read the table again. A shard that restarts forgets its plans
(a fetch answers 404; the client plans again).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from dataclasses import dataclass, field

from ....auth import Caller
from ....governance.authorize import authorizer
from ....errors import CatalogError
from ....governance import vending
from ....governance.vending import vend_objects
from ....iceberg import metadata as md
from ....iceberg.tables import props as properties_of
from ...features.uniform import served
from .base import IcebergBase
from .errors import IcebergError, iceberg_error, require_data
from . import scan

PLAN_SECONDS = 3600          # how long a plan's state is kept
MAX_PLANS = 1000             # plans kept per shard; the oldest go first
DEFAULT_WAIT_MS = 30_000        # pyiceberg 0.12 does not poll a submitted plan: wait long for it


def _wait_seconds() -> float:
    raw = os.environ.get("SHARDCAT_ICEBERG_PLAN_WAIT_MS", "")
    return (int(raw) if raw.isdecimal() else DEFAULT_WAIT_MS) / 1000


@dataclass
class Plan:
    id: str
    principal_id: int
    metastore_id: str
    table_id: str
    created: float
    status: str = "submitted"                 # submitted, completed, failed, cancelled
    pages: list = field(default_factory=list)  # ScanTasks JSON pages; the first is answered with the plan
    credentials: list = field(default_factory=list)
    error: IcebergError | None = None
    work: asyncio.Task | None = None


def _no_plan(plan_id: str) -> IcebergError:
    return IcebergError(404, "NoSuchPlanIdException", f"No plan with id '{plan_id[:80]}' for this table.")


def _no_task(task: str) -> IcebergError:
    return IcebergError(404, "NoSuchPlanTaskException", f"No plan task '{task[:80]}' for this table.")


class Planning(IcebergBase):
    """The four planning operations, over the shard's plans (`self.plans`)."""

    def _plans(self) -> dict[str, Plan]:
        plans = self.__dict__.setdefault("plans", {})
        now = time.monotonic()
        for plan_id in [p.id for p in plans.values() if now - p.created > PLAN_SECONDS]:
            self._forget(plans.pop(plan_id))
        while len(plans) > MAX_PLANS:
            self._forget(plans.pop(next(iter(plans))))
        return plans

    @staticmethod
    def _forget(plan: Plan) -> None:
        if plan.work is not None and not plan.work.done():
            plan.work.cancel()

    async def _readable(self, caller: Caller, full_name: str):
        asset = await self._table(caller, full_name, read=True)        # a UniForm table too: planning reads
        require_data(await authorizer(self.shard, caller), asset, write=False)   # SELECT; policies: trusted only
        return asset

    async def plan_scan(self, caller: Caller, full_name: str, body: dict) -> dict:
        try:
            request = scan.scan_request(body)
        except scan.UnsupportedScan as e:
            raise IcebergError(406, "UnsupportedOperationException", str(e)) from None
        except scan.BadScan as e:
            raise IcebergError(400, "BadRequestException", str(e)) from None
        asset = await served(self.shard, caller, await self._readable(caller, full_name))   # UniForm: its metadata
        plan = Plan(secrets.token_urlsafe(18), caller.principal_id, caller.metastore(), asset.id, time.monotonic())
        plan.work = asyncio.create_task(self._run(caller, asset, request, plan))
        self._plans()[plan.id] = plan
        try:
            await asyncio.wait_for(asyncio.shield(plan.work), _wait_seconds())
        except asyncio.TimeoutError:
            return {"status": "submitted", "plan-id": plan.id}
        except Exception:
            pass                           # its error is the plan's, answered below
        answer = self._answer(plan)
        if plan.status == "failed":
            self._plans().pop(plan.id, None)
            raise plan.error
        return {**answer, "plan-id": plan.id}

    async def _run(self, caller: Caller, asset, request, plan: Plan) -> None:
        try:
            location = properties_of(asset)[md.METADATA_LOCATION]
            io = await self._io(caller, asset.storage_path, write=False)
            metadata = await asyncio.to_thread(md.read_metadata, location, io)
            tasks = await asyncio.to_thread(scan.plan_files, metadata, location, io, request, asset.storage_path)
            pages = scan.task_pages(metadata, tasks, request, scan.PAGE_TASKS)
            granted = await vend_objects(self.shard, caller, asset.storage_path, scan.planned_paths(pages))
            plan.credentials = [{"prefix": url, "config": md.storage_properties(
                g["answer"], os.environ.get("SHARDCAT_S3_ENDPOINT"), vending.region())}
                for g in granted for url in g["urls"]]
            plan.pages, plan.status = pages, "completed"
        except scan.BadScan as e:
            plan.error, plan.status = IcebergError(400, "BadRequestException", str(e)), "failed"
        except IcebergError as e:
            plan.error, plan.status = e, "failed"
        except Exception as e:             # a CatalogError (vending) or a storage error: the plan failed
            plan.error = iceberg_error(e) if isinstance(e, CatalogError) else \
                IcebergError(500, "ServiceFailureException", f"Planning failed: {type(e).__name__}")
            plan.status = "failed"

    def _answer(self, plan: Plan) -> dict:
        if plan.status == "completed":
            first, rest = plan.pages[0], plan.pages[1:]
            out = {"status": "completed", **first}
            if rest:
                out["plan-tasks"] = [f"{plan.id}:{i}" for i in range(1, len(plan.pages))]
            if plan.credentials:
                out["storage-credentials"] = plan.credentials
            return out
        return {"status": plan.status}

    def _mine(self, caller: Caller, asset, plan_id: str) -> Plan:
        plan = self._plans().get(plan_id)
        if plan is None or plan.principal_id != caller.principal_id or plan.table_id != asset.id or \
                plan.metastore_id != caller.metastore():
            raise _no_plan(plan_id)
        return plan

    async def fetch_plan(self, caller: Caller, full_name: str, plan_id: str) -> dict:
        asset = await self._readable(caller, full_name)
        plan = self._mine(caller, asset, plan_id)
        if plan.status == "failed":
            error = plan.error
            return {"status": "failed", "error": {"message": error.message, "type": error.kind, "code": error.status}}
        return self._answer(plan)

    async def cancel_plan(self, caller: Caller, full_name: str, plan_id: str) -> None:
        asset = await self._readable(caller, full_name)
        plan = self._mine(caller, asset, plan_id)
        self._forget(plan)
        plan.status, plan.pages, plan.credentials = "cancelled", [], []

    async def fetch_tasks(self, caller: Caller, full_name: str, body: dict) -> dict:
        task = body.get("plan-task")
        if not isinstance(task, str):
            raise IcebergError(400, "BadRequestException", "Field 'plan-task' must be a string.")
        asset = await self._readable(caller, full_name)
        plan_id, _, index = task.rpartition(":")
        try:
            plan = self._mine(caller, asset, plan_id)
        except IcebergError:
            raise _no_task(task) from None
        if plan.status != "completed" or not index.isdecimal() or not 0 < int(index) < len(plan.pages):
            raise _no_task(task)
        return plan.pages[int(index)]
