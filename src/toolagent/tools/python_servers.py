"""`python` servers of mcp.json: `package.module:attr`, imported when a runtime opens.

The target is an `MCPServer` (the SDK's, or its low-level `Server`), a list of functions, or a
function of no arguments (sync or async) returning either. Functions become a `FunctionSource`
(`function_source.py`); a server object joins the pool and is spoken to over the SDK's
in-memory transport, so it is listed, called, timed out and cancelled as any MCP server is. Either
way its tools go through the same stack (gate, limits, records, timeout, cancellation) as every
other tool.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ServerConfigError
from ..mcp.config import PythonServer, ServersConfig
from ..mcp.connect import connect
from .function_source import FunctionSource

if TYPE_CHECKING:
    from mcp.server import MCPServer, Server


@dataclass
class PythonServers:
    """The `python` servers of a config, imported."""

    functions: list[FunctionSource] = field(default_factory=list)
    """Function lists, one source each."""
    servers: dict[str, MCPServer | Server[Any]] = field(default_factory=dict)
    """Server objects by name, served by the pool in process."""


def _fail(name: str, params: PythonServer, why: str) -> ServerConfigError:
    return ServerConfigError(f"{why} (`python`: {params.python!r})", path=f"mcpServers.{name}.python")


async def load_target(name: str, params: PythonServer) -> MCPServer | Server[Any] | list[Callable[..., Any]]:
    """Import `params.python` and, for a factory, call it.

    Raises:
        ServerConfigError: the module cannot be imported, has no such attribute, or the attribute
            is not a server, a list of functions or a factory of either (the message says which).
    """
    from mcp.server import MCPServer, Server

    module_name, _, attr = params.python.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(f"{exc.name}.")):
            raise _fail(
                name,
                params,
                f"server '{name}': no module named '{exc.name}': install the package or put its directory on "
                "PYTHONPATH",
            ) from exc
        raise _fail(name, params, f"server '{name}': importing '{module_name}' failed: {exc}") from exc
    except Exception as exc:
        raise _fail(
            name, params, f"server '{name}': importing '{module_name}' raised {type(exc).__name__}: {exc}"
        ) from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise _fail(name, params, f"server '{name}': module '{module_name}' has no attribute '{attr}'")
        target = getattr(target, part)
    if callable(target) and not isinstance(target, MCPServer | Server):
        target = await _call_factory(name, params, target)
    if isinstance(target, MCPServer | Server):
        return target
    if isinstance(target, list | tuple) and target and all(callable(t) for t in target):
        return list(target)
    raise _fail(
        name,
        params,
        f"server '{name}': '{params.python}' is {_kind(target)}; it must be an MCPServer, a non-empty list of "
        "functions, or a function of no arguments returning one of them",
    )


async def _call_factory(name: str, params: PythonServer, factory: Callable[..., Any]) -> Any:
    try:
        inspect.signature(factory).bind()
    except TypeError:
        raise _fail(
            name,
            params,
            f"server '{name}': '{params.python}' takes arguments; a factory takes none (to expose one "
            "function as a tool, put it in a list)",
        ) from None
    except ValueError:
        pass  # no signature to read (a builtin): try it
    try:
        made = factory()
        return await made if inspect.isawaitable(made) else made
    except Exception as exc:
        raise _fail(name, params, f"server '{name}': '{params.python}' raised {type(exc).__name__}: {exc}") from exc


def _kind(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "an empty list" if not value else "a list of things that are not all functions"
    return f"a {type(value).__name__}"


async def load_python_servers(config: ServersConfig) -> PythonServers:
    """Import every enabled `python` server of `config`.

    Raises:
        ServerConfigError: one cannot be loaded (the first, by config order).
        ConfigError: a function of a list cannot be a tool (its parameters or type hints).
    """
    loaded = PythonServers()
    for name, params in config.enabled.items():
        if not isinstance(params, PythonServer):
            continue
        target = await load_target(name, params)
        if not isinstance(target, list):
            loaded.servers[name] = target
            continue
        origin = f"python server '{name}' ({params.python})"
        try:
            loaded.functions.append(FunctionSource(name, target, options=params, origin=origin))
        except ServerConfigError:
            raise
        except ConfigError as exc:
            raise ServerConfigError(f"server '{name}': {exc.message}", path=f"mcpServers.{name}.python") from exc
    return loaded


def pool_config(config: ServersConfig, loaded: PythonServers) -> ServersConfig:
    """`config` without the `python` servers that are function lists (they are no MCP servers)."""
    kept = {
        name: params
        for name, params in config.mcpServers.items()
        if not isinstance(params, PythonServer) or name in loaded.servers or params.disabled
    }
    return config.model_copy(update={"mcpServers": kept})


def in_process_connector(servers: Mapping[str, MCPServer | Server[Any]], config: ServersConfig) -> Callable[..., Any]:
    """A pool connector: `python` server objects over the in-memory transport, the rest as usual."""
    by_params = {id(params): servers[name] for name, params in config.mcpServers.items() if name in servers}

    @contextlib.asynccontextmanager
    async def open_session(params: Any, *, message_handler: Any = None, **options: Any) -> AsyncIterator[Any]:
        server = by_params.get(id(params))
        if server is None:
            async with connect(params, message_handler=message_handler, **options) as session:
                yield session
            return
        from mcp import Client

        async with Client(server, message_handler=message_handler) as client:
            yield client.session

    return open_session


__all__ = ["PythonServers", "in_process_connector", "load_python_servers", "load_target", "pool_config"]
