"""Who may look, and forms that only the dashboard's own pages can submit.

**Token.** With a token (``--token`` or ``MYSQLQ_DASHBOARD_TOKEN``) every page and endpoint but
the login form and the static files needs it: as ``Authorization: Bearer <token>`` (scripts),
or as the session cookie the login form sets (browsers). The cookie holds an HMAC of a fixed
text keyed with the token, not the token: it proves the token was given, stays valid across
restarts with the same token, and stops being valid when the token changes.

**CSRF.** A state-changing request (a POST) must carry a form field ``csrf`` equal to an HMAC,
under a secret of this process, of a random nonce kept in an HttpOnly ``SameSite=Strict``
cookie (a signed double-submit cookie); a request the browser marks as cross-site
(``Sec-Fetch-Site: cross-site``) is refused as well. Another site can neither read the field
nor make the browser send the cookie with its own form.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

__all__ = ["CSRF_COOKIE", "SESSION_COOKIE", "TOKEN_ENV", "Guard"]

TOKEN_ENV = "MYSQLQ_DASHBOARD_TOKEN"
SESSION_COOKIE = "mysqlq_dashboard_session"
CSRF_COOKIE = "mysqlq_dashboard_csrf"
_SESSION_TEXT = b"mysqlq dashboard session v1"


def _mac(key: bytes, text: bytes) -> str:
    return hmac.new(key, text, hashlib.sha256).hexdigest()


class Guard:
    """The token check and the CSRF tokens of one dashboard process."""

    def __init__(self, token: str | None, secret: bytes | None = None) -> None:
        self.token = token or None
        self._secret = secret or secrets.token_bytes(32)

    # the token ----------------------------------------------------------------------------

    @property
    def required(self) -> bool:
        return self.token is not None

    def token_matches(self, given: str | None) -> bool:
        if self.token is None:
            return True
        if not given:
            return False
        return hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))

    def session_value(self) -> str:
        """The session cookie's value for the configured token."""
        assert self.token is not None
        return _mac(self.token.encode("utf-8"), _SESSION_TEXT)

    def authorize(self, headers: Mapping[str, str], cookies: Mapping[str, str]) -> str:
        """``"ok"``, ``"missing"`` (no credentials) or ``"wrong"`` (credentials that do not
        match the token)."""
        if self.token is None:
            return "ok"
        auth = headers.get("authorization", "")
        if auth:
            scheme, _, given = auth.partition(" ")
            if scheme.lower() == "bearer" and self.token_matches(given.strip()):
                return "ok"
            return "wrong"
        cookie = cookies.get(SESSION_COOKIE)
        if cookie:
            ok = hmac.compare_digest(
                cookie.encode("ascii", "replace"), self.session_value().encode()
            )
            return "ok" if ok else "wrong"
        return "missing"

    # CSRF ---------------------------------------------------------------------------------

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    def csrf_token(self, nonce: str) -> str:
        return _mac(self._secret, b"csrf:" + nonce.encode("utf-8"))

    def csrf_ok(self, nonce: str | None, given: str | None, fetch_site: str | None) -> bool:
        if fetch_site == "cross-site":
            return False
        if not nonce or not given:
            return False
        return hmac.compare_digest(self.csrf_token(nonce).encode(), given.encode("utf-8"))
