"""A vended TemporaryCredentials answer of Azure or GCS, spelled as each client's configuration.

governance/vending.py answers in the Unity Catalog API's shape (`azure_user_delegation_sas`
{`sas_token`}, `gcp_oauth_token` {`oauth_token`}, `url`, `expiration_time`, and shardcat's
`endpoint_url` for an emulator). The Iceberg REST catalog hands the same credential as FileIO
properties and the UC Delta API as its DeltaStorageCredential `config`; both are spelled here,
pure, so every protocol spells them alike. S3's spellings stay beside their callers
(iceberg/metadata.py, delta/api_rules.py).

Iceberg (pyiceberg's and Iceberg Java's names): `adls.sas-token.<account host>` (pyiceberg
takes the account name from the key) and `adls.sas-token-expires-at-ms.<account host>`; with an
emulator's endpoint, also `adls.connection-string` (BlobEndpoint + SharedAccessSignature: adlfs
addresses a custom endpoint only through one). UC Delta API: `azure.sas-token`.
GCS: Iceberg's `gcs.oauth2.token` and `gcs.oauth2.token-expires-at` (milliseconds, as pyiceberg reads it),
`gcs.service.host` for an emulator's endpoint; the UC Delta API's `gcs.oauth-token` (its delta.yaml).
"""

from __future__ import annotations

from .urls import adls_parts


def azure_sas(vended: dict) -> str | None:
    return (vended.get("azure_user_delegation_sas") or {}).get("sas_token")


def gcp_token(vended: dict) -> str | None:
    return (vended.get("gcp_oauth_token") or {}).get("oauth_token")


def iceberg_properties(vended: dict) -> dict:
    """Iceberg FileIO properties for an Azure or GCS answer; {} for any other."""
    token = gcp_token(vended)
    if token:
        out = {"gcs.oauth2.token": token, "gcs.oauth2.token-expires-at": str(vended["expiration_time"])}
        if vended.get("endpoint_url"):
            out["gcs.service.host"] = vended["endpoint_url"]
        return out
    sas = azure_sas(vended)
    if not sas:
        return {}
    account, _, host, _ = adls_parts(vended["url"])
    out = {f"adls.sas-token.{host}": sas, f"adls.sas-token-expires-at-ms.{host}": str(vended["expiration_time"]),
           "adls.account-name": account}
    if vended.get("endpoint_url"):
        out["adls.connection-string"] = f"BlobEndpoint={vended['endpoint_url']};SharedAccessSignature={sas}"
    return out


def delta_config(vended: dict) -> dict:
    """The UC Delta API's DeltaStorageCredential config for an Azure or GCS answer; {} for any other."""
    token = gcp_token(vended)
    if token:
        out = {"gcs.oauth-token": token}
        if vended.get("endpoint_url"):
            out["gcs.service.host"] = vended["endpoint_url"]     # shardcat's: where an emulator answers
        return out
    sas = azure_sas(vended)
    if not sas:
        return {}
    out = {"azure.sas-token": sas}
    if vended.get("endpoint_url"):
        out["azure.endpoint"] = vended["endpoint_url"]      # shardcat's: where an emulator answers
    return out
