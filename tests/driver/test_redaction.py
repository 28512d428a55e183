"""No password in what the driver shows: reprs, error messages, doctor's report; and a password
of any characters parses (the user info ends at the DSN's last '@')."""

from __future__ import annotations

import json
import urllib.parse

import pytest

import mysqlq
from mysqlq.connection import connect, parse_dsn
from mysqlq.errors import DatabaseError, Error, InvalidDSN
from mysqlq.schema import doctor
from mysqlq_dev.harness import ThrowawayDatabase
from mysqlq_dev.localserver import ExternalServer

# every piece holds "sekr"; the rest are the characters that break naive parsing or redaction
PASSWORD = "sekr1@sekr2:sekr3/sekr4%sekr5\"'\\ü?sekr6#sekr7"
ENCODED = urllib.parse.quote(PASSWORD, safe="")


def dsns(where: str = "127.0.0.1:1") -> dict[str, str]:
    """The password written in each way a DSN may hold it, for the server at ``where``."""
    return {
        "encoded": f"mysql://app:{ENCODED}@{where}/db",
        "raw": f"mysql://app:{PASSWORD}@{where}/db",
        "unencoded @": f"mysql://app:sekr1@sekr2@{where}/db",
    }


# DSNs that cannot be used, each naming the password somewhere
BAD = {
    "no scheme": "app:sekr1@sekr2@127.0.0.1:1/db",
    "no @ at all": "mysql://app:sekr1/db",
    "bad port": f"mysql://app:{PASSWORD}@127.0.0.1:x/db",
    "bad host list": f"mysql://app:{PASSWORD}@h1:1,h2:x/db",
    "bad parameter": f"mysql://app:{PASSWORD}@h/db?bogus=1",
    "an @ in the query": f"mysql://app:{PASSWORD}@h/db?init_command=SET @x=1",
}


def assert_secret_free(text: str, what: str = "") -> None:
    for piece in ("sekr", "ü", "%C3%BC", "\\xfc", "\\u00fc"):
        assert piece not in text, f"{what}: {piece!r} in {text!r}"


def test_a_password_of_any_characters_parses() -> None:
    forms = dsns("db.example:3307")
    assert parse_dsn(forms["encoded"]) == parse_dsn(forms["raw"])
    url = parse_dsn(forms["raw"])
    assert (url.username, url.password, url.host, url.port, url.database) == (
        "app",
        PASSWORD,
        "db.example",
        3307,
        "db",
    )
    # the last '@' ends the password; str() renders it back, to connect with
    assert parse_dsn(forms["unencoded @"]).password == "sekr1@sekr2"
    assert parse_dsn(str(url)) == url


def test_no_password_in_reprs_or_dsn_errors() -> None:
    for name, dsn in dsns().items():
        url = parse_dsn(dsn)
        assert_secret_free(repr(url), name)
        assert url.redacted() == "mysql://app:***@127.0.0.1:1/db"
        assert_secret_free(repr(ExternalServer(dsn)), name)
        assert_secret_free(repr(ThrowawayDatabase(dsn, "db")), name)
        # any mysqlq error that quotes a DSN
        assert_secret_free(str(Error(f"cannot use {dsn}: refused")), name)
    for name, dsn in BAD.items():
        with pytest.raises(InvalidDSN) as raised:
            parse_dsn(dsn)
        assert_secret_free(f"{raised.value} {raised.value!r}", name)


def test_no_password_when_the_server_refuses(server) -> None:
    """A wrong password, an unreachable port: neither the error nor doctor's report (text and
    JSON) names the password."""
    root = parse_dsn(server.dsn)
    wrong = str(root.replace(password=PASSWORD))
    with pytest.raises(DatabaseError) as raised:
        connect(wrong)
    assert raised.value.errno == 1045
    with pytest.raises(mysqlq.ConnectionLost) as lost:
        connect(dsns()["raw"])
    for exc in (raised.value, lost.value):
        assert_secret_free(f"{exc} {exc!r}")
    for dsn in (wrong, *dsns().values(), *BAD.values()):
        report = doctor.diagnose(dsn)
        assert not report.healthy and report.get("connection").status == "error"
        assert_secret_free(json.dumps(report.as_dict(), ensure_ascii=False), dsn)
        assert_secret_free(repr(report), dsn)
