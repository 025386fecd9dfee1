"""MLflow's Unity Catalog model registry (`uc:` registry URI, the open-source UC client in
mlflow-skinny) against a real shardcat server: log a pyfunc model in a run, register it as
catalog.schema.model, load a version back and predict, list and search, aliases, delete.

MLflow's client is synchronous and the server shares this test's event loop, so every
MLflow call runs in a worker thread. MLflow writes the version's files itself to the
storage_location the catalog returns (file:// here), then finalizes the version.
"""

from __future__ import annotations

import asyncio
import os
from urllib.parse import urlparse

import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException


class AddN(mlflow.pyfunc.PythonModel):
    def __init__(self, n: int):
        self.n = n

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        return model_input + self.n


@pytest.fixture
async def registry(ws, tmp_path, monkeypatch):
    for name, body in (("/catalogs", {"name": "ml"}), ("/schemas", {"name": "prod", "catalog_name": "ml"})):
        status, _ = await ws.call("POST", name, json=body)
        assert status == 200
    monkeypatch.setenv("MLFLOW_UC_OSS_TOKEN", ws.token)
    # A local file tracking store for the run (mlflow-skinny has no SQL store); MLflow 3 wants an opt-in.
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    mlflow.set_registry_uri(f"uc:{ws.url}")
    yield MlflowClient()
    mlflow.set_registry_uri(None)
    mlflow.set_tracking_uri(None)


def _log(n: int, registered_model_name: str | None = None):
    with mlflow.start_run() as run:
        info = mlflow.pyfunc.log_model(name="model", python_model=AddN(n), pip_requirements=["pandas"],
                                       registered_model_name=registered_model_name)
    return run.info.run_id, info


async def test_mlflow_uc_registry_round_trip(ws, registry):
    client = registry
    name = "ml.prod.adder"

    # Version 1 registered as it is logged (MLflow 3 registers the logged model, source models:/<id>,
    # with no run id); version 2 logged first, then registered from its run (runs:/, with the run id).
    _, logged1 = await asyncio.to_thread(_log, 1, name)
    run2, _ = await asyncio.to_thread(_log, 10)
    mv2 = await asyncio.to_thread(mlflow.register_model, f"runs:/{run2}/model", name)
    assert (mv2.name, mv2.version, mv2.status) == (name, 2, "READY")

    # The catalog saw both versions, finalized, each with its source and its own managed storage.
    status, model = await ws.call("GET", f"/models/{name}")
    assert status == 200 and model["full_name"] == name
    status, listed = await ws.call("GET", f"/models/{name}/versions")
    versions = listed["model_versions"]
    assert [(v["version"], v["status"], v.get("run_id")) for v in versions] == [(1, "READY", None), (2, "READY", run2)]
    assert versions[0]["source"] == f"models:/{logged1.model_id}"
    for v in versions:
        assert v["storage_location"].startswith(model["storage_location"] + "/versions/")
        # MLflow wrote the model's files there itself.
        assert os.path.exists(os.path.join(urlparse(v["storage_location"]).path, "MLmodel"))

    # Load each version back through the registry and predict.
    frame = pd.DataFrame({"x": [1, 2]})
    for version, n in ((1, 1), (2, 10)):
        loaded = await asyncio.to_thread(mlflow.pyfunc.load_model, f"models:/{name}/{version}")
        predicted = await asyncio.to_thread(loaded.predict, frame)
        assert list(predicted["x"]) == [1 + n, 2 + n]

    mv = await asyncio.to_thread(client.get_model_version, name, "2")
    assert (mv.name, int(mv.version), mv.run_id, mv.status) == (name, 2, run2, "READY")
    found = await asyncio.to_thread(client.search_model_versions, f"name='{name}'")
    assert sorted(int(v.version) for v in found) == [1, 2]
    models = await asyncio.to_thread(client.search_registered_models)
    assert [m.name for m in models] == [name]
    await asyncio.to_thread(client.update_model_version, name, "1", "first")
    assert (await asyncio.to_thread(client.get_model_version, name, "1")).description == "first"
    await asyncio.to_thread(client.update_registered_model, name, "adds n")
    assert (await asyncio.to_thread(client.get_registered_model, name)).description == "adds n"

    # Aliases: MLflow's open-source UC client does not implement them (it raises
    # NotImplementedError), so they are set over the endpoints its protos name, then the
    # aliased version is loaded with MLflow from the location the catalog gives.
    status, alias = await ws.call("PUT", f"/models/{name}/aliases/champion", json={"version_num": 2})
    assert status == 200 and alias == {"alias_name": "champion", "version_num": 2}
    status, by_alias = await ws.call("GET", f"/models/{name}/aliases/champion")
    assert status == 200 and by_alias["version"] == 2
    assert by_alias["aliases"] == [{"alias_name": "champion", "version_num": 2}]
    champion = await asyncio.to_thread(mlflow.pyfunc.load_model, by_alias["storage_location"])
    assert list((await asyncio.to_thread(champion.predict, frame))["x"]) == [11, 12]

    # Missing things are NOT_FOUND on MLflow's side too.
    with pytest.raises(MlflowException) as e:
        await asyncio.to_thread(client.get_registered_model, "ml.prod.missing")
    assert e.value.error_code == "NOT_FOUND"
    with pytest.raises(MlflowException) as e:
        await asyncio.to_thread(client.get_model_version, name, "7")
    assert e.value.error_code == "NOT_FOUND"

    # Delete: versions first (the open-source API refuses a model with versions unless forced).
    with pytest.raises(MlflowException) as e:
        await asyncio.to_thread(client.delete_registered_model, name)
    # MLflow's error codes have no FAILED_PRECONDITION: it reports INTERNAL_ERROR and keeps our code and message.
    assert str(e.value).startswith("FAILED_PRECONDITION: Registered model 'ml.prod.adder' is not empty")
    await asyncio.to_thread(client.delete_model_version, name, "2")
    status, body = await ws.call("GET", f"/models/{name}/aliases/champion")
    assert status == 404   # the alias went with its version
    await asyncio.to_thread(client.delete_model_version, name, "1")
    await asyncio.to_thread(client.delete_registered_model, name)
    with pytest.raises(MlflowException) as e:
        await asyncio.to_thread(client.get_registered_model, name)
    assert e.value.error_code == "NOT_FOUND"
