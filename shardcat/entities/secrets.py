"""Which request fields carry secrets, and how an error message avoids showing them.

A secret-bearing field (a credential's client_secret or private_key, an access key's secret, a
session or bearer token, a password, and the credential objects that hold them) is never echoed
in an error message, whatever shape it came in: messages about such a field name it and its
type only. `scrub` is the safety net the error middleware applies to every refusal of a request
that carried such fields: any of their values found in the message is replaced.
"""

from __future__ import annotations

# Objects whose every value is secret, whatever their shape (a string sent where an object was due
# is most likely the secret itself).
SECRET_CONTAINERS = frozenset({
    "azure_service_principal", "gcp_service_account_key", "aws_temporary_credentials",
    "azure_user_delegation_sas", "gcp_oauth_token", "r2_temporary_credentials", "aws_access_key",
    "s3_compatible", "azure_storage_key",
})
SECRET_FIELDS = frozenset({"token", "token_value", "bearer_token", "authorization", "api_key", "sas_token",
                           "access_key", "secret", "password", "credentials",
                           "recipient_profile_str", "recipient_profile"})     # a Delta Sharing profile holds a bearer token
_SECRET_WORDS = ("secret", "password", "private_key", "session_token", "access_token", "refresh_token",
                 "bearer", "sas_token", "oauth_token", "api_key", "account_key")
REDACTED = "[REDACTED]"
_MIN_SCRUBBED = 6     # shorter values are not scrubbed from messages (they would mangle them); the
                      # messages themselves never show secret fields, this is only the safety net


def is_secret_field(name) -> bool:
    """Whether a field of this name carries a secret (or an object of secrets)."""
    if not isinstance(name, str):
        return False
    n = name.lower().rpartition(".")[2]
    return n in SECRET_CONTAINERS or n in SECRET_FIELDS or any(w in n for w in _SECRET_WORDS)


def shown(name: str, value) -> str:
    """`: <value>` to end a message about field `name`, or nothing for a secret-bearing field."""
    return "" if is_secret_field(name) else f": {value!r:.80}"


def secret_values(body) -> list[str]:
    """Every string under a secret-bearing key of a JSON body, at any depth, longest first."""
    found: list[str] = []
    stack = [(False, body)]
    while stack:
        secret, value = stack.pop()
        if isinstance(value, dict):
            stack += [(secret or is_secret_field(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(secret, v) for v in value]
        elif secret and isinstance(value, str) and len(value) >= _MIN_SCRUBBED:
            found.append(value)
    return sorted(set(found), key=len, reverse=True)


def scrub(message: str, secrets: list[str]) -> str:
    """`message` with every secret in `secrets`, and every long enough start of one (messages
    truncate what they quote), replaced by [REDACTED]."""
    for secret in secrets:
        for variant in (secret, repr(secret)[1:-1]):
            for end in range(len(variant), _MIN_SCRUBBED - 1, -1):
                if variant[:end] in message:
                    message = message.replace(variant[:end], REDACTED)
                    break
    return message
