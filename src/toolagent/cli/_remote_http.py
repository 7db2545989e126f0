"""The CLI's HTTP client of a running `toolagent serve` (`--api URL`, `TOOLAGENT_API_KEY`).

Every answer the API gives as an error becomes the line and exit code the local command would
end with (`errors.ERROR_CODES`, the table both read); an unreachable server or a refused key ends
with a line naming the URL and the variable to fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx

from ..errors import ERROR_CODES
from ._app import EXIT_FAILED, EXIT_USAGE, fail, state

#: Seconds to wait for the server to accept a connection (a call itself may run for minutes).
CONNECT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Answer:
    """An API answer: its status, headers and JSON body."""

    status: int
    headers: Mapping[str, str]
    body: Any

    @property
    def ok(self) -> bool:
        """A 2xx answer."""
        return 200 <= self.status < 300

    @property
    def error(self) -> Mapping[str, Any]:
        """The error envelope's `error` (code, message, details); empty for a success."""
        err = self.body.get("error") if isinstance(self.body, dict) else None
        return err if isinstance(err, dict) else {}

    @property
    def message(self) -> str:
        """The error's message."""
        return str(self.error.get("message") or f"HTTP {self.status}")

    @property
    def details(self) -> Mapping[str, Any]:
        """The error's details, when they are an object."""
        details = self.error.get("details")
        return details if isinstance(details, dict) else {}


class Api:
    """A client of the API at `state.api`, authenticated with `TOOLAGENT_API_KEY`."""

    def __init__(self) -> None:
        from ..settings import Settings

        settings = Settings.from_env()
        self.url = (state.api or "").rstrip("/")
        key = settings.api_key
        if not key:
            fail(
                f"TOOLAGENT_API_KEY is not set: --api {self.url} needs an API key of the server's store "
                "(`toolagent keys create --user NAME` there prints one)",
                EXIT_USAGE,
            )
        self._client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_S),
        )

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Answer:
        """Send one request; an unreachable server, a refused key or an answer that is not the API's
        ends the command."""
        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            fail(
                f"cannot reach the toolagent API at {self.url} ({type(exc).__name__}: {exc}): is `toolagent serve` "
                "running there? (--api / TOOLAGENT_API_URL)",
                EXIT_FAILED,
            )
        try:
            body = response.json()
        except ValueError:
            fail(
                f"{self.url} answered {method} {path} with HTTP {response.status_code} and no JSON: "
                "is it a toolagent API? (--api / TOOLAGENT_API_URL)",
                EXIT_FAILED,
            )
        answer = Answer(response.status_code, response.headers, body)
        if answer.status == 401:
            fail(
                f"the toolagent API at {self.url} refused the key in TOOLAGENT_API_KEY: {answer.message}",
                EXIT_USAGE,
            )
        return answer

    def get(self, path: str, **kwargs: Any) -> Answer:
        """GET `path`."""
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any) -> Answer:
        """POST `body` as JSON to `path`."""
        return self.request("POST", path, json=body)

    def fail(self, answer: Answer) -> NoReturn:
        """End the command with the error `answer` carries, as the local command would."""
        code = str(answer.error.get("code") or "INTERNAL_SERVER_ERROR")
        message = answer.message
        if code == "NOT_FOUND" and not message.startswith("tool "):
            message += f"\n(looked up by the toolagent API at {self.url}, from {self.origin})"
        fail(message, ERROR_CODES[code].exit_code if code in ERROR_CODES else EXIT_FAILED)

    @property
    def origin(self) -> str:
        """Where the URL came from: `--api` or `TOOLAGENT_API_URL`."""
        return "--api" if state.sources.get("api") == "flag" else "TOOLAGENT_API_URL"


__all__ = ["Answer", "Api"]
