"""A request the server will not answer: its HTTP status, a message naming the field at fault,
and the OpenAI-style error body every client reads (`{"error": {"message", "type", "param",
"code"}}`). Raised anywhere a request is read; the app turns it into the response, never a 500
and never a traceback in the log."""
from __future__ import annotations

from typing import Any

TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
         413: "invalid_request_error", 429: "rate_limit_error", 503: "service_unavailable"}


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": TYPES.get(self.status, "server_error"), "param": self.param,
                          "code": self.status}}


def bad(param: str | None, message: str) -> ApiError:
    """A 400 naming `param` (a dotted path into the request, e.g. messages.0.content.1.type)."""
    return ApiError(400, f"{param}: {message}" if param else message, param)
