"""The input rules of issue 28 in isolation: names (NFC, no invisible characters), principal names,
request text (entities/text.py), secret-bearing fields and the scrubbing of messages
(entities/secrets.py), and sealing secrets with rotating keys (store/sealing.py)."""

from __future__ import annotations

import os
import stat
import unicodedata

import pytest
from cryptography.fernet import Fernet
from hypothesis import given
from hypothesis import strategies as st

from shardcat.entities.manifest import KINDS
from shardcat.entities.names import (MAX_PRINCIPAL_LENGTH, check_name, check_principal, full_name_key,
                                     normal_text_name, split_full_name)
from shardcat.entities.secrets import REDACTED, is_secret_field, scrub, secret_values, shown
from shardcat.entities.text import bad_char
from shardcat.entities.types import CATALOG
from shardcat.errors import CatalogError
from shardcat.store.sealing import (SecretBox, SecretKeyError, load_keys, rotate_key_file, seal_credential_info)

NFD_CAFE = "cafe\u0301"
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\u202a", "\u202e", "\u2066", "\u2069", "\u00ad", "\ufeff",
             "\u061c", "\u180e"]


@pytest.mark.parametrize("spelling", ["café", NFD_CAFE, "CAFÉ", "CAFE\u0301"])
def test_spellings_of_one_name_are_one_key(spelling):
    assert check_name(spelling, "catalog") == "café"
    assert full_name_key(f"{spelling}.s.t", 3, "table") == "café.s.t"


@pytest.mark.parametrize("char", INVISIBLE + ["\x00", "\x1b", "\x85", "\ud800", "\ue000", "\U000f0000", "\u2028",
                                              "\ufdd0"])
def test_invisible_and_control_characters_are_refused(char):
    for name in (f"ca{char}fe", f"{char}cafe", f"cafe{char}"):
        with pytest.raises(CatalogError) as e:
            check_name(name, "catalog")
        assert e.value.code == "INVALID_PARAMETER_VALUE" and "invalid character" in e.value.message
        with pytest.raises(CatalogError):
            normal_text_name(name, "column")
        with pytest.raises(CatalogError):
            check_principal(name, "principal")


def test_the_length_limit_counts_the_composed_name():
    assert check_name("e\u0301" * 255, "catalog") == "é" * 255      # 510 code points decomposed, 255 composed
    with pytest.raises(CatalogError):
        check_name("é" * 256, "catalog")


@given(st.characters(categories=("Mn", "Mc", "Me")), st.text(alphabet="abé\u0301", max_size=5))
def test_a_name_may_not_begin_with_a_combining_mark(mark, rest):
    """Issue 42, item 18: a lone mark at the start would draw over the dot before it in a full name."""
    for name in (mark + rest, mark + "a", "a." + mark):
        with pytest.raises(CatalogError) as e:
            full_name_key(name, name.count(".") + 1, "catalog")
        assert e.value.code == "INVALID_PARAMETER_VALUE" and "combining mark" in e.value.message
    assert check_name("a" + mark + rest, "catalog")        # inside a name, a mark combines as it should


def test_principal_names():
    assert check_principal("ALICE@example.com", "p") == "ALICE@example.com"     # case kept
    assert check_principal(f"{NFD_CAFE}@example.com", "p") == "café@example.com"
    assert check_principal("p" * MAX_PRINCIPAL_LENGTH, "p") == "p" * MAX_PRINCIPAL_LENGTH
    for bad in ("p" * (MAX_PRINCIPAL_LENGTH + 1), "p" * 10_000, " a", "a ", "", "   ", 5, None):
        with pytest.raises(CatalogError):
            check_principal(bad, "p")


def test_owner_fields_take_the_principal_rule():
    assert CATALOG.check_update({"owner": f"{NFD_CAFE}@x"})["owner"] == "café@x"
    with pytest.raises(CatalogError):
        CATALOG.check_update({"owner": "p" * 10_000})
    assert "principal" in KINDS


@given(st.text())
def test_names_are_stable_under_normalisation(text):
    try:
        name = check_name(text, "catalog")
    except CatalogError:
        return
    assert unicodedata.is_normalized("NFC", name)
    assert check_name(name, "catalog") == name
    assert check_name(unicodedata.normalize("NFD", text), "catalog") == name


def test_request_text():
    assert bad_char("plain") is None and bad_char("tab\there", controls=False) is None
    assert bad_char("é") is None and bad_char("\u200b") is None     # text (names refuse it themselves)
    assert "NUL" in bad_char("a\x00b", controls=False)
    assert "surrogate" in bad_char("a\udc80", controls=False)
    assert "control" in bad_char("a\x01")


def test_secret_fields_and_messages():
    for name in ("client_secret", "private_key", "secret_access_key", "session_token", "azure_service_principal",
                 "gcp_service_account_key", "bearer_token", "token", "password", "aws_temporary_credentials"):
        assert is_secret_field(name), name
        assert shown(name, "s3cr3t") == ""
    for name in ("name", "comment", "role_arn", "page_token_lifetime", "url"):
        assert not is_secret_field(name), name
    assert "x" in shown("comment", "x")
    body = {"name": "c", "azure_service_principal": {"client_secret": "the-secret-1234", "n": ["also-secret-99"]},
            "gcp_service_account_key": "raw-private-key-text", "comment": "not-a-secret-at-all"}
    assert set(secret_values(body)) == {"the-secret-1234", "also-secret-99", "raw-private-key-text"}
    message = "Got 'the-secret-1234', 'raw-private-k' and 'not-a-secret-at-all'"
    out = scrub(message, secret_values(body))
    assert "the-secret" not in out and "raw-private" not in out and "not-a-secret-at-all" in out and REDACTED in out


def test_sealing_and_rotation(tmp_path):
    keys = load_keys(tmp_path)                      # first start: the key file is made, mode 0600
    path = tmp_path / "secret.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(keys) == 1
    assert load_keys(tmp_path) == keys              # and kept
    box = SecretBox(keys)
    sealed = box.seal("s3cr3t")
    assert sealed.startswith("sealed:v1:") and "s3cr3t" not in sealed
    assert box.open(sealed) == "s3cr3t" and box.open("plain") == "plain" and box.is_current(sealed)
    rotate_key_file(path)
    rotated = load_keys(tmp_path)
    assert len(rotated) == 2 and rotated[1] == keys[0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    new_box = SecretBox(rotated)
    assert new_box.open(sealed) == "s3cr3t" and not new_box.is_current(sealed)
    resealed = new_box.reseal(sealed)
    assert SecretBox(rotated[:1]).open(resealed) == "s3cr3t"
    with pytest.raises(SecretKeyError):
        SecretBox(keys).open(resealed)              # the old key alone cannot read the new seal


def test_key_sources(tmp_path, monkeypatch):
    key = Fernet.generate_key()
    monkeypatch.setenv("SC_KEYS", f"{key.decode()},{Fernet.generate_key().decode()}")
    assert load_keys(tmp_path, "env:SC_KEYS")[0] == key
    assert not (tmp_path / "secret.key").exists()
    with pytest.raises(SecretKeyError):
        load_keys(tmp_path, "env:SC_NOT_SET")
    with pytest.raises(SecretKeyError):
        load_keys(tmp_path, str(tmp_path / "nope.key"))
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    os.chmod(bad, 0o600)
    with pytest.raises(SecretKeyError):
        SecretBox(load_keys(tmp_path, str(bad)))


def test_credential_info_is_sealed():
    box = SecretBox([Fernet.generate_key()])
    info = {"azure_service_principal": {"directory_id": "d", "application_id": "a", "client_secret": "s3cr3t"},
            "comment": "c"}
    sealed = seal_credential_info(box, info)
    assert sealed["azure_service_principal"]["client_secret"].startswith("sealed:v1:")
    assert info["azure_service_principal"]["client_secret"] == "s3cr3t"       # the input is not changed
    assert seal_credential_info(box, sealed) == sealed                          # sealed once only
    with pytest.raises(SecretKeyError):
        seal_credential_info(None, info)                                        # never stored in plain text
    assert seal_credential_info(None, {"aws_iam_role": {"role_arn": "arn:x"}}) == {"aws_iam_role": {"role_arn": "arn:x"}}


@pytest.mark.parametrize("name,parts", [("c.s.m", 4), ("c", 4), ("c.s.m.1.2", 4), ("c.s", 3), ("c.s.t", 2)])
def test_a_full_name_of_the_wrong_shape_is_a_clear_400_for_every_depth(name, parts):
    # a model version's name has four parts: its shape once had no message (a 500 from the history API)
    with pytest.raises(CatalogError) as e:
        split_full_name(name, parts, "model_version")
    assert e.value.code == "INVALID_PARAMETER_VALUE" and "expected the form" in e.value.message
