"""Envoy's Lua HTTP filter as far as the gateway's tenant filter uses it, on LuaJIT (lupa), as Envoy runs scripts.

The stream handle offers what the script calls, with Envoy's semantics (envoyproxy/envoy
source/extensions/filters/http/lua/wrappers.cc and lua_filter.cc; docs/root/configuration/http/http_filters/
lua_filter.rst): `headers()` (get: case-insensitive, several values joined with ","; replace: set, adding when
absent), `respond(headers, body)` (a local reply: no further filter runs), and `filterContext()`, a metadata object
whose `get(key)` returns the value converted to Lua (a JSON object becomes a table), built from the
EnvoyExtensionPolicy's `filterContext` (Envoy Gateway v1.9.0 turns it into LuaPerRoute.filter_context).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lupa import luajit21 as lupa


@dataclass
class Outcome:
    """What the filter did to one request: the headers it passes on, or its local reply."""

    headers: list[tuple[str, str]]
    status: int | None = None
    body: str | None = None
    reply_headers: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return ",".join(values) if values else None


def run(script: str, context: dict[str, Any], headers: list[tuple[str, str]]) -> Outcome:
    """Run `script`'s envoy_on_request on a request with `headers` (name, value pairs, repeats allowed) and the
    filter context `context`."""
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    lua.execute(script)
    outcome = Outcome(headers=list(headers))

    def to_lua(value: Any) -> Any:
        if isinstance(value, dict):
            return lua.table_from({k: to_lua(v) for k, v in value.items()})
        if isinstance(value, list):
            return lua.table_from([to_lua(v) for v in value])
        return value

    class Headers:
        def get(self, _self: Any, name: str) -> str | None:
            return outcome.get(name)

        def replace(self, _self: Any, name: str, value: str) -> None:
            kept = [(k, v) for k, v in outcome.headers if k.lower() != name.lower()]
            outcome.headers = [*kept, (name.lower(), value)]

    class FilterContext:
        def get(self, _self: Any, key: str) -> Any:
            return to_lua(context.get(key))

    headers_object = lua.table_from({"get": Headers().get, "replace": Headers().replace})
    context_object = lua.table_from({"get": FilterContext().get})

    def respond(_self: Any, reply: Any, body: str | None) -> None:
        reply = dict(reply.items())
        outcome.status = int(reply.pop(":status"))
        outcome.reply_headers = reply
        outcome.body = body

    handle = lua.table_from(
        {
            "headers": lambda _self: headers_object,
            "filterContext": lambda _self: context_object,
            "respond": respond,
        }
    )
    lua.globals().envoy_on_request(handle)
    return outcome
