"""A medallion pipeline on PySpark through shardcat: raw files in a volume -> bronze -> silver -> gold.

    shardcat serve &                                  # in another terminal, or as here in the background
    pip install -e ".[spark]"                         # PySpark 4; needs Java 17
    python examples/spark_pipeline.py                 # --rows 200000 by default; --help for more

As the admin (token from ~/.shardcat/admin-token, or --token), it sets up catalog `demo`, schema
`demo.shop` (dropped and made anew on each run), a managed volume `demo.shop.landing`, a masking
function, and a service principal `pipeline-engine` marked as a trusted engine, with grants on the
catalog. As that engine it then
  1. writes generated raw orders (CSV) and customers (JSON) into the volume;
  2. bronze: reads them by volume path into bronze_orders and bronze_customers (Parquet tables);
  3. silver: cleans and types them into silver_orders (a catalog-managed Delta table) and
     silver_customers (Parquet), whose email column the admin then masks;
  4. creates the view customer_orders over silver, and the gold tables revenue_by_country and
     top_customers from it (emails arrive masked: the engine applies the catalog's mask);
Every write reports its lineage to the catalog (what it read). It ends with a summary of what it
read and wrote, the lineage, and where the time went (catalog vs Spark).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import time
import urllib.parse
from pathlib import Path

CONTROL = "/api/1.0/unity-control"
SCIM_EXT = "urn:ietf:params:scim:schemas:extension:shardcat:2.0:Principal"
ENGINE = "pipeline-engine"
COUNTRIES = ["de", "fr", "it", "es", "nl", "us", "ca", "br", "jp", "in"]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- set-up, as the admin ------------------------------------------------------------------------

def setup(admin, catalog: str) -> str:
    """Catalog, schema (fresh), volume, masking function, the trusted engine and its grants; the
    engine's token."""
    from shardcat.spark import CatalogError
    try:
        admin.call("POST", "/catalogs", {"name": catalog, "comment": "shardcat.spark example"})
    except CatalogError as e:
        if e.code != "ALREADY_EXISTS":
            raise
    try:
        admin.call("DELETE", f"/schemas/{catalog}.shop", params={"force": "true"})
    except CatalogError as e:
        if e.code != "NOT_FOUND":
            raise
    admin.call("POST", "/schemas", {"name": "shop", "catalog_name": catalog})
    admin.call("POST", "/volumes", {"name": "landing", "catalog_name": catalog, "schema_name": "shop",
                                    "volume_type": "MANAGED", "comment": "raw files as they arrive"})
    param = {"name": "email", "type_text": "string", "type_name": "STRING", "position": 0,
             "type_json": json.dumps({"name": "email", "type": "string", "nullable": True, "metadata": {}})}
    admin.call("POST", "/functions", {"function_info": {
        "name": "mask_email", "catalog_name": catalog, "schema_name": "shop", "input_params": {"parameters": [param]},
        "data_type": "STRING", "full_data_type": "string", "routine_body": "SQL",
        "routine_definition": "concat(substr(email, 1, 2), '***@', substring_index(email, '@', -1))",
        "parameter_style": "S", "is_deterministic": True, "sql_data_access": "CONTAINS_SQL", "is_null_call": False,
        "security_type": "DEFINER", "specific_name": "mask_email", "comment": "keeps the domain"}})

    # the engine: a service principal marked trusted (it enforces row filters and column masks)
    base = admin.api.removesuffix("/api/2.1/unity-catalog") + CONTROL
    found = _control(admin, base, "GET", "/scim2/ServicePrincipals",
                     params={"filter": f'applicationId eq "{ENGINE}"'}).get("Resources") or []
    body = {"applicationId": ENGINE, "displayName": "example pipeline", SCIM_EXT: {"trustedEngine": True}}
    if found:
        _control(admin, base, "PUT", f"/scim2/ServicePrincipals/{found[0]['id']}", body)
    else:
        _control(admin, base, "POST", "/scim2/ServicePrincipals", body)
    token = _control(admin, base, "POST", "/auth/tokens", {"principal": ENGINE, "lifetime_seconds": 3600,
                                                           "comment": "examples/spark_pipeline.py"})["token_value"]
    admin.call("PATCH", f"/permissions/catalog/{catalog}", {"changes": [{"principal": ENGINE, "add": [
        "USE CATALOG", "USE SCHEMA", "SELECT", "MODIFY", "CREATE TABLE", "READ VOLUME", "WRITE VOLUME", "EXECUTE"]}]})
    return token


def _control(admin, base: str, method: str, path: str, body=None, params=None) -> dict:
    """A call outside the Unity Catalog prefix (SCIM, tokens), with the admin's client."""
    saved = admin.api
    admin.api = base
    try:
        return admin.call(method, path, body, params)
    finally:
        admin.api = saved


# ---- raw data ---------------------------------------------------------------------------------

def generate(volume_url: str, rows: int, customers: int, seed: int = 7) -> dict:
    """Orders as CSV files and customers as JSON lines, written into the volume's storage."""
    root = Path(urllib.parse.urlparse(volume_url).path)
    rnd = random.Random(seed)
    (root / "orders").mkdir(parents=True, exist_ok=True)
    (root / "customers").mkdir(parents=True, exist_ok=True)
    files, per_file = 4, (rows + 3) // 4
    written = 0
    for f in range(files):
        with open(root / "orders" / f"orders-{f}.csv", "w", newline="") as out:
            w = csv.writer(out)
            w.writerow(["order_id", "customer_id", "order_date", "qty", "unit_price", "status"])
            for i in range(f * per_file, min(rows, (f + 1) * per_file)):
                # some dirt for silver to clean: duplicates, zero quantities, cancelled orders
                oid = i if rnd.random() > 0.01 else max(0, i - 1)
                w.writerow([oid, rnd.randrange(customers), f"2026-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}",
                            rnd.choice([0, 1, 1, 2, 3, 5]), f"{rnd.uniform(1, 200):.2f}",
                            rnd.choice(["paid", "paid", "paid", "cancelled"])])
                written += 1
    with open(root / "customers" / "customers.json", "w") as out:
        for c in range(customers):
            out.write(json.dumps({"id": c, "name": f"customer {c}", "email": f"c{c}@mail{c % 7}.example",
                                  "country": rnd.choice(COUNTRIES)}) + "\n")
    return {"orders": written, "customers": customers}


# ---- the pipeline, as the engine ----------------------------------------------------------------

def pipeline(cat, admin, catalog: str, rows: int, customers: int) -> dict:
    s = f"{catalog}.shop"
    counts = {}

    log("raw: generating files in the landing volume")
    raw = generate(cat.volume_location(f"{s}.landing"), rows, customers)
    log(f"raw: {raw['orders']:,} orders (4 CSV files), {raw['customers']:,} customers (JSON lines)")

    log("bronze: volume files -> bronze_orders, bronze_customers")
    from pyspark.sql import functions as F
    orders = cat.read_path(f"/Volumes/{catalog}/shop/landing/orders", format="csv", header="true") \
        .withColumn("_ingested_from", F.input_file_name())
    cat.write(orders, f"{s}.bronze_orders", mode="create", comment="orders as they arrived")
    people = cat.read_path(f"/Volumes/{catalog}/shop/landing/customers", format="json")
    cat.write(people, f"{s}.bronze_customers", mode="create")

    log("silver: typed, deduplicated, valid orders -> silver_orders (Delta); customers -> silver_customers")
    silver_orders = cat.sql(f"""
        SELECT CAST(order_id AS BIGINT) AS order_id, CAST(customer_id AS BIGINT) AS customer_id,
               CAST(order_date AS DATE) AS order_date, CAST(qty AS INT) AS qty,
               CAST(qty AS INT) * CAST(unit_price AS DOUBLE) AS amount
        FROM (SELECT *, row_number() OVER (PARTITION BY order_id ORDER BY _ingested_from) AS n
              FROM {s}.bronze_orders WHERE status = 'paid' AND CAST(qty AS INT) > 0)
        WHERE n = 1""")
    cat.write(silver_orders, f"{s}.silver_orders", mode="create", format="DELTA")
    silver_customers = cat.sql(f"SELECT CAST(id AS BIGINT) AS customer_id, name, email, upper(country) AS country "
                               f"FROM {s}.bronze_customers")
    cat.write(silver_customers, f"{s}.silver_customers", mode="create")

    log("governance: the admin masks silver_customers.email (function mask_email)")
    table = admin.call("GET", f"/tables/{s}.silver_customers")
    columns = [dict(c, mask={"function_name": f"{s}.mask_email", "using_column_names": []})
               if c["name"] == "email" else c for c in table["columns"]]
    admin.call("PATCH", f"/tables/{s}.silver_customers", {"columns": columns})
    cat.catalog.forget("TABLE", f"{s}.silver_customers")

    log("gold: view customer_orders; revenue_by_country and top_customers from it")
    cat.create_view(f"{s}.customer_orders", f"""
        SELECT o.order_id, o.order_date, o.amount, c.customer_id, c.name, c.email, c.country
        FROM {s}.silver_orders o JOIN {s}.silver_customers c ON o.customer_id = c.customer_id""",
                    comment="paid orders with their customers")
    revenue = cat.sql(f"""
        SELECT country, date_trunc('month', order_date) AS month, count(*) AS orders, round(sum(amount), 2) AS revenue
        FROM {s}.customer_orders GROUP BY country, date_trunc('month', order_date)""")
    cat.write(revenue, f"{s}.revenue_by_country", mode="create")
    top = cat.sql(f"""
        SELECT customer_id, name, email, country, round(sum(amount), 2) AS revenue
        FROM {s}.customer_orders GROUP BY customer_id, name, email, country ORDER BY revenue DESC LIMIT 10""")
    cat.write(top, f"{s}.top_customers", mode="create", format="DELTA")

    for t in ("bronze_orders", "bronze_customers", "silver_orders", "silver_customers", "revenue_by_country",
              "top_customers"):
        counts[t] = cat.sql(f"SELECT count(*) FROM {s}.{t}").collect()[0][0]
    best = cat.sql(f"SELECT name, email, revenue FROM {s}.top_customers ORDER BY revenue DESC LIMIT 3").collect()
    return {"raw": raw, "rows": counts, "top": [tuple(r) for r in best]}


def run(spark, url: str, admin_token: str, *, catalog: str = "demo", rows: int = 200_000,
        customers: int = 5_000) -> dict:
    """The whole example; returns its summary (also used by benchmarks/bench_resolve.py)."""
    from shardcat.spark import connect
    from shardcat.spark.catalog import CatalogClient
    started = time.perf_counter()
    admin = CatalogClient(url, admin_token)
    log(f"set-up: catalog {catalog}, schema {catalog}.shop, volume, mask function, trusted engine {ENGINE}")
    engine_token = setup(admin, catalog)
    with connect(spark, url, engine_token, trusted_engine=True) as cat:
        out = pipeline(cat, admin, catalog, rows, customers)
        job = cat.summary()
    wall = time.perf_counter() - started
    catalog_s = job["catalog_seconds"] + admin.stats.seconds
    out.update(wall_seconds=round(wall, 2), catalog_seconds=round(catalog_s, 2),
               spark_seconds=round(wall - catalog_s, 2), job=job, admin_calls=admin.stats.calls)
    return out


def print_summary(out: dict) -> None:
    job = out["job"]
    print()
    print("summary")
    print(f"  raw files read:   {out['raw']['orders']:,} order rows (CSV), {out['raw']['customers']:,} customers (JSON)")
    print("  tables written:   " + ", ".join(f"{t} ({n:,} rows)" for t, n in out["rows"].items()))
    print("  writes (lineage the catalog recorded):")
    for w in job["writes"]:
        read = ", ".join(name.split(".")[-1] for name in w["sources"]) or "-"
        print(f"    {w['table'].split('.')[-1]} [{w['format']}] <- {read}")
    print(f"  reads by name:    {sum(v for k, v in job['reads'].items() if not k.startswith('/'))}, "
          f"by path: {sum(v for k, v in job['reads'].items() if k.startswith('/'))}")
    print(f"  catalog:          {job['catalog_calls'] + out['admin_calls']} calls "
          f"({job['resolve_calls']} batched resolves, {job['cache_hits']} names answered from the job cache, "
          f"{job['unchanged']} revalidated as unchanged)")
    print(f"  top customers (email masked by the catalog's function): {out['top']}")
    print(f"  wall time {out['wall_seconds']} s = catalog {out['catalog_seconds']} s + Spark and files "
          f"{out['spark_seconds']} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", default=os.environ.get("SHARDCAT_URL", "http://127.0.0.1:8080"))
    p.add_argument("--token", default=os.environ.get("SHARDCAT_TOKEN"),
                   help="an account admin's token (default: ~/.shardcat/admin-token)")
    p.add_argument("--catalog", default="demo")
    p.add_argument("--rows", type=int, default=200_000, help="raw orders to generate")
    p.add_argument("--customers", type=int, default=5_000)
    args = p.parse_args()
    token = args.token or (Path.home() / ".shardcat" / "admin-token").read_text().strip()
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("shardcat-example")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        print_summary(run(spark, args.server, token, catalog=args.catalog, rows=args.rows, customers=args.customers))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
