"""Run one unitycatalog-ai function-client call against a shardcat server and print its result as JSON.

test_engine_uc_ai.py runs this in a child process: unitycatalog-ai applies nest_asyncio to the
whole interpreter when imported, which the test session's own event loop should not inherit.

    python uc_ai_calls.py <api url> <token> <action> <json arguments>

prints {"ok": <result>}, {"status": <HTTP status>, "error": <the server's error JSON>}, or
{"failed", "message"} for an error the client raised of its own (it wraps some of the server's). The async
methods are used (newer unitycatalog-client versions make their ApiClient only inside a running loop).
"""

from __future__ import annotations

import asyncio
import json
import sys


def add_numbers(a: int, b: int) -> int:
    """Adds two integers.

    Args:
        a: the first number
        b: the second number

    Returns:
        int: their sum
    """
    return a + b


async def main(api: str, token: str, action: str, args: dict) -> dict:
    from unitycatalog.ai.core.client import UnitycatalogFunctionClient
    from unitycatalog.client import ApiClient, Configuration
    from unitycatalog.client.exceptions import ApiException

    api_client = ApiClient(Configuration(host=api), header_name="Authorization", header_value=f"Bearer {token}")
    client = UnitycatalogFunctionClient(api_client=api_client, execution_mode="local")
    try:
        if action == "create":
            # The client's defaults, properties="null" among them, as a user calls it.
            info = await client.create_python_function_async(func=add_numbers, catalog=args["catalog"],
                                                             schema=args["schema"])
            return {"ok": {"full_name": info.full_name, "properties": info.properties,
                           "routine_body": info.routine_body, "external_language": info.external_language}}
        if action == "list":
            page = await client.list_functions_async(catalog=args["catalog"], schema=args["schema"])
            return {"ok": sorted(f.name for f in page)}
        if action == "execute":
            result = await client.execute_function_async(args["name"], args["parameters"])
            return {"ok": {"value": result.value, "error": result.error}}
        raise ValueError(action)
    except ApiException as e:
        return {"status": e.status, "error": json.loads(e.body) if e.body else None}
    except Exception as e:      # the client wraps some of the server's refusals in its own errors
        return {"failed": type(e).__name__, "message": str(e)}
    finally:
        await client.close_async()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])))))
