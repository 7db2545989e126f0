"""Render the manual's generated references from the code: the environment-variable tables (from
the pydantic-settings classes, in one table), the layers diagram (from the import-linter
contract in pyproject.toml) and the command-line reference (from the Typer app).

Each generated part sits in a page between `<!-- generated: NAME -->` and `<!-- end generated -->`;
`scripts/gen-docs` rewrites those parts, `scripts/gen-docs --check` exits 1 when a committed page
differs from what the code gives (tests/docs/test_generated_docs.py runs the check).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
BEGIN = "<!-- generated: {name} (scripts/gen-docs writes this part; edit the code, not the table) -->"
END = "<!-- end generated -->"

#: Where each `TOOLAGENT_*` variable's default lives: a constant `module:NAME` (rendered from its
#: value) or, for a default that is behaviour rather than a value, the words for it. A settings field
#: missing here is an error, so a new variable cannot reach the manual without its default.
TOOLAGENT_DEFAULTS: dict[str, str] = {
    "database_url": "`toolagent.db` in the data directory (`$XDG_DATA_HOME/toolagent`, else `~/.local/share/toolagent`), or `./.toolagent/toolagent.db` where one exists (SQLite)",
    "mcp_config": "toolagent.mcp.config:DEFAULT_CONFIG_FILE=`./{}`, else the config shipped in the package",
    "engine_config": "none: the built-in engine defaults",
    "user": "the local user (named after the OS account)",
    "api_url": "none: the CLI opens the store and starts the servers itself",
    "api_key": "none",
    "log_level": "toolagent.engine.logs:DEFAULT_LEVEL",
    "log_format": "`text`",
    "metrics_auth": "toolagent.api.app:DEFAULT_METRICS_AUTH",
    "max_body_bytes": "toolagent.api.body_limit:DEFAULT_MAX_BODY_BYTES",
    "flow_max_items": "toolagent.runs.flow:DEFAULT_FLOW_MAX_ITEMS",
    "flow_max_chars": "toolagent.runs.flow:DEFAULT_FLOW_MAX_CHARS",
    "execution": "`inprocess`",
    "worker_stalled_s": "toolagent.workers.app:DEFAULT_STALLED_S",
    "job_retention_s": "toolagent.workers.app:DEFAULT_JOB_RETENTION_S",
    "audit_key": "none: the audit chain is unkeyed",
    "audit_key_file": "none",
    "max_result_bytes": "toolagent.model.bounds:DEFAULT_MAX_RESULT_BYTES",
    "max_deliverable_bytes": "toolagent.model.bounds:DEFAULT_MAX_DELIVERABLE_BYTES",
    "sql_tools_require_agent": "`false`",
    "commit_window_ms": "toolagent.store.batch:DEFAULT_WINDOW_S*1000",
    "commit_batch_max": "toolagent.store.batch:DEFAULT_MAX_SIZE",
    "gc_threshold": "toolagent._heap:GEN0_THRESHOLD",
    "gateway_allowed_origins": "the loopback origins: `http://127.0.0.1:*`, `http://localhost:*`, `http://[::1]:*`",
}


def _constant(spec: str) -> str:
    """The text of a default: a constant's value (optionally scaled or put in a template), or the words."""
    match = re.fullmatch(r"([\w.]+):(\w+)(?:\*(\d+))?(?:=(.*))?", spec)
    if match is None:
        return spec
    module, name, scale, template = match.groups()
    value: Any = getattr(importlib.import_module(module), name)
    if scale:
        value = value * int(scale)
        value = int(value) if float(value).is_integer() else value
    if template:
        return template.format(value)
    if isinstance(value, str):
        return f"`{value.lower() if name == 'DEFAULT_LEVEL' else value}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) and value >= 10_000 else str(value)


def field_docstrings(cls: type) -> dict[str, str]:
    """Each field's docstring (the string right under its annotation), read from the class's source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                docs[node.target.id] = " ".join(str(after.value.value).split())
    return docs


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def env_table() -> str:
    """Every environment variable, in one table: toolagent's, then the Supabase server's."""
    return "\n".join(
        [
            "| variable | read by | meaning | default |",
            "| --- | --- | --- | --- |",
            *_toolagent_rows(),
            *_supabase_rows(),
        ]
    )


def _toolagent_rows() -> list[str]:
    """The `TOOLAGENT_*` variables: name, meaning (the field's docstring) and default."""
    from toolagent.settings import Settings

    docs = field_docstrings(Settings)
    fields = list(Settings.model_fields)
    unknown = sorted(set(fields) ^ set(TOOLAGENT_DEFAULTS))
    if unknown:
        raise SystemExit(
            f"scripts/gen_docs.py: TOOLAGENT_DEFAULTS and Settings differ on {unknown}: "
            "say where each new variable's default lives (and drop removed ones)"
        )
    rows = []
    for var, name in Settings.env_names().items():
        if name not in docs:
            raise SystemExit(f"scripts/gen_docs.py: Settings.{name} has no docstring; write one under the field")
        rows.append(f"| `{var}` | toolagent | {_cell(docs[name])} | {_cell(_constant(TOOLAGENT_DEFAULTS[name]))} |")
    return rows


def _supabase_rows() -> list[str]:
    """The Supabase server's `SUPABASE_*` variables, with the defaults the model declares."""
    from toolagent.servers.supabase.settings import SupabaseSettings

    docs = field_docstrings(SupabaseSettings)
    rows = []
    for var, name in SupabaseSettings.env_names().items():
        default = SupabaseSettings.model_fields[name].default
        if default is None or default == ():
            shown = "none"
        elif isinstance(default, tuple):
            shown = ", ".join(f"`{t}`" for t in default)
        else:
            shown = f"`{default}`"
        rows.append(f"| `{var}` | the Supabase server | {_cell(docs.get(name, ''))} | {_cell(shown)} |")
    return rows


def _option_row(ctx: Any, param: Any) -> str:
    names = ", ".join(f"`{n}`" for n in (*param.opts, *param.secondary_opts))
    if param.is_flag:
        kind = ""
    else:
        kind = f"`{param.metavar or param.display_type(ctx).strip('<>').upper()}`"
    default = param.default
    if callable(default) or default in (None, False, ()) or param.is_flag:
        shown = ""
    else:
        shown = f"`{', '.join(map(str, default)) if isinstance(default, list | tuple) else default}`"
    help_text = " ".join((param.help or "").split())
    if param.envvar and isinstance(param.envvar, str):
        help_text += f" (env `{param.envvar}`)"
    return f"| {names} | {kind} | {_cell(shown)} | {_cell(help_text)} |"


def _usage(command: Any, path: str) -> str:
    parts = [path]
    if any(not _is_argument(p) and not p.name.startswith("global_") and p.name != "help" for p in command.params):
        parts.append("[OPTIONS]")
    for p in command.params:
        if _is_argument(p):
            name = (p.metavar or p.name).upper()
            name = f"{name}..." if p.nargs == -1 else name
            parts.append(name if p.required else f"[{name}]")
    if getattr(command, "commands", None):
        parts.append("COMMAND")
    return " ".join(parts)


def _is_argument(param: Any) -> bool:
    return param.param_type_name == "argument"


def _help(command: Any) -> str:
    text = inspect.cleandoc(command.help or command.short_help or "")
    # Typer's markdown mode joins lines; the page keeps paragraphs and drops the Args sections.
    text = text.split("\n\nArgs:", 1)[0]
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n"))


def _render_command(ctx: Any, command: Any, path: str, out: list[str], level: int) -> None:
    out += [f"{'#' * level} `{path}`", "", _help(command), "", "```text", _usage(command, path), "```", ""]
    arguments = [p for p in command.params if _is_argument(p)]
    options = [p for p in command.params if not _is_argument(p) and not p.name.startswith("global_")]
    options = [p for p in options if p.name != "help"]
    if arguments:
        out += ["| argument | meaning |", "| --- | --- |"]
        for p in arguments:
            out.append(
                f"| `{(p.metavar or p.name).upper()}` | {_cell(' '.join((getattr(p, 'help', '') or '').split()))} |"
            )
        out.append("")
    if options:
        out += ["| option | takes | default | meaning |", "| --- | --- | --- | --- |"]
        out += [_option_row(ctx, p) for p in options]
        out.append("")
    subcommands = getattr(command, "commands", None)
    if subcommands is not None:
        sub_ctx = command.context_class(command, info_name=path.split()[-1], parent=ctx)
        for name in command.list_commands(sub_ctx):
            sub = command.get_command(sub_ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                _render_command(sub_ctx, sub, f"{path} {name}", out, level + 1 if level < 3 else level)


def cli_reference() -> str:
    """Every command of `toolagent.cli.app`, with its usage, arguments and options."""
    import typer.main

    from toolagent.cli import app

    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="toolagent")
    out = ["## Global options", "", "Given before or after the command.", ""]
    out += ["| option | takes | default | meaning |", "| --- | --- | --- | --- |"]
    out += [_option_row(ctx, p) for p in root.params if p.name != "help"]
    out.append("")
    for name in root.list_commands(ctx):
        command = root.get_command(ctx, name)
        if command is not None and not getattr(command, "hidden", False):
            _render_command(ctx, command, f"toolagent {name}", out, 2)
    return "\n".join(out).rstrip()


def layers_diagram() -> str:
    """The import-linter layers contract of pyproject.toml as a diagram, top layer first, each
    package with the first sentence of its docstring."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    out = ["```text"]
    for depth, layer in enumerate(layers):
        packages = [name.strip() for name in layer.split("|")]
        for index, package in enumerate(packages):
            doc = (importlib.import_module(package).__doc__ or "").strip().split("\n\n")[0]
            sentence = " ".join(doc.split()).split(". ")[0].rstrip(".")
            sentence = sentence if len(sentence) <= 100 else sentence[:99].rstrip() + "…"
            short = package.removeprefix("toolagent.")
            marker = f"{depth + 1:>2}" if index == 0 else "  "
            out.append(f"{marker}  {short:<14} {sentence}")
        if depth < len(layers) - 1:
            out.append("    |")
    out.append("```")
    return "\n".join(out)


#: Each generated part: its name, the page that holds it, and what renders it.
PARTS: dict[str, tuple[str, Callable[[], str]]] = {
    "env": ("operations/configuration.md", env_table),
    "cli": ("cli.md", cli_reference),
    "layers": ("architecture.md", layers_diagram),
}


def render(page_text: str, name: str, body: str) -> str:
    """The page with its generated part `name` replaced by `body`."""
    begin = BEGIN.format(name=name)
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(END), re.S)
    if not pattern.search(page_text):
        raise SystemExit(f"scripts/gen_docs.py: the page has no `{begin}` ... `{END}` block for {name}")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{END}", page_text, count=1)


def stale_pages(write: bool) -> list[str]:
    """The pages whose generated parts differ from the code's; rewritten when `write`."""
    stale: list[str] = []
    pages: dict[Path, str] = {}
    for name, (page, renderer) in PARTS.items():
        path = DOCS / page
        current = pages.get(path, path.read_text(encoding="utf-8"))
        pages[path] = render(current, name, renderer())
    for path, text in pages.items():
        if path.read_text(encoding="utf-8") != text:
            stale.append(str(path.relative_to(REPO)))
            if write:
                path.write_text(text, encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gen-docs", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page differs from the code; write nothing")
    args = parser.parse_args(argv)
    stale = stale_pages(write=not args.check)
    if args.check and stale:
        print(f"stale generated docs: {', '.join(stale)}; run scripts/gen-docs", file=sys.stderr)
        return 1
    for page in stale:
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
