"""`toolagent audit verify | export | export-head | list`: check and read the tamper-evident audit log."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.markup import escape

from ..engine.audit import AuditLog
from ..engine.audit_chain import AuditVerification, check_records
from ..engine.audit_key import audit_key, parse_head, sign_head
from ..errors import UsageError
from ..store import open_store
from ._app import EXIT_FAILED, EXIT_OK, app, emit_json, err, out, run, state
from ._tables import Column, fitted_table

UNKEYED_NOTE = (
    "note: the audit chain is unkeyed (no TOOLAGENT_AUDIT_KEY): anyone who can write the store "
    "can rewrite it undetected"
)

audit_app = typer.Typer(help="Verify, export and list the audit log.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")


def _parse_since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        since = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(
            f"--since {value!r} is not an ISO date or time: use e.g. 2025-01-31 or 2025-01-31T12:00:00Z"
        ) from None
    return since if since.tzinfo is not None else since.replace(tzinfo=UTC)


def _report(result: AuditVerification) -> int:
    if state.json:
        emit_json(result.to_json())
        if not result.keyed:
            err.print(UNKEYED_NOTE, markup=False)
        return EXIT_OK if result.ok else EXIT_FAILED
    if not result.keyed:
        err.print(UNKEYED_NOTE, markup=False)
    if result.ok:
        out.print(f"ok: {result.rows_checked} rows, chain head {result.head_seq} {result.head_hash}", markup=False)
    else:
        err.print(
            f"[bold red]audit log tampered:[/] first bad row {result.first_bad_seq}: {escape(result.reason or '')}",
            markup=True,
        )
    return EXIT_OK if result.ok else EXIT_FAILED


def _read_export(path: str) -> list[dict[str, object]]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--file: cannot read {path}: {exc.strerror}") from exc
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}:{n}: not a JSON line ({exc.msg})") from exc
    return records


@audit_app.command("verify")
def verify(
    file: str | None = typer.Option(
        None,
        "--file",
        "-f",
        help="Check an exported JSONL file (or - for stdin) instead of the store.",
    ),
    head: str | None = typer.Option(
        None,
        "--head",
        help="Also check a signed head written by `audit export-head` (needs the audit key).",
    ),
) -> None:
    """Check every row's hash and link and the chain head. Exit 0 intact, 1 tampered (first bad row named),
    2 usage or configuration error."""

    async def body() -> AuditVerification:
        key = audit_key()
        pinned = None
        if head is not None:
            if key is None:
                raise UsageError("--head needs the audit key: set TOOLAGENT_AUDIT_KEY or TOOLAGENT_AUDIT_KEY_FILE")
            try:
                text = Path(head).read_text(encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"--head: cannot read {head}: {exc.strerror}") from exc
            pinned = parse_head(text, head)
            if not pinned.valid(key):
                return AuditVerification(
                    False,
                    0,
                    pinned.seq,
                    f"the head file {head} is not signed with this audit key (forged or changed, or a different key)",
                    keyed=True,
                )
        if file is not None:
            result = check_records(_read_export(file), key=key)
            rows: dict[int, str | None] = {}  # an export is checked for the pinned head by its last row only
            if pinned is not None and result.ok and result.head_seq == pinned.seq:
                rows[pinned.seq] = result.head_hash
        else:
            async with open_store(state.db) as store:
                log = AuditLog(store.db, key=key)
                result = await log.verify()
                rows = {} if pinned is None else {pinned.seq: await log.hash_at(pinned.seq)}
        if pinned is None or pinned.seq == 0 or not result.ok:
            return result  # a head pinned on an empty log holds nothing to find
        if result.head_seq < pinned.seq or rows.get(pinned.seq) is None:
            return _pinned_bad(
                result,
                pinned.seq,
                f"the log ends at row {result.head_seq} but the exported head is "
                f"row {pinned.seq} (rows were deleted from the end)",
            )
        if rows[pinned.seq] != pinned.hash:
            return _pinned_bad(
                result, pinned.seq, f"row {pinned.seq} does not match the exported head's hash (the log was rewritten)"
            )
        return result

    raise typer.Exit(_report(run(body)))


def _pinned_bad(result: AuditVerification, seq: int, reason: str) -> AuditVerification:
    return AuditVerification(False, result.rows_checked, seq, reason, result.head_seq, result.head_hash, result.keyed)


@audit_app.command("export-head")
def export_head(
    out_file: str = typer.Option("-", "--out", "-o", help="File to write, or - for stdout."),
) -> None:
    """Write the chain head (seq, hash, time) signed with the audit key; keep it away from the store."""

    async def body() -> dict[str, object]:
        key = audit_key()
        if key is None:
            raise UsageError("export-head needs the audit key: set TOOLAGENT_AUDIT_KEY or TOOLAGENT_AUDIT_KEY_FILE")
        async with open_store(state.db) as store:
            log = AuditLog(store.db, key=key)
            result = await log.verify()
        if not result.ok:
            raise typer.Exit(_report(result))
        return sign_head(result.head_seq, result.head_hash, key).to_json()

    data = run(body)
    text = json.dumps(data, indent=2) + "\n"
    if out_file == "-":
        sys.stdout.write(text)
        return
    try:
        Path(out_file).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--out: cannot write {out_file}: {exc.strerror}") from exc
    err.print(f"wrote the signed head (row {data['seq']}) to {out_file}", markup=False)


@audit_app.command("export")
def export(
    output: str = typer.Option("-", "--output", "-o", help="File to write, or - for stdout."),
    since: str | None = typer.Option(
        None, "--since", help="Only rows recorded at or after this ISO time (UTC if no zone)."
    ),
) -> None:
    """Write the audit log as JSON lines: every hashed field plus the row's hash."""

    async def body() -> int:
        start = _parse_since(since)
        async with open_store(state.db) as store:
            log = AuditLog(store.db)
            if output == "-":
                return await log.export(sys.stdout, since=start)
            try:
                return await log.export(Path(output), since=start)
            except OSError as exc:
                raise UsageError(f"--output: cannot write {output}: {exc.strerror}") from exc

    count = run(body)
    if output != "-":
        err.print(f"wrote {count} audit rows to {output}", markup=False)


@audit_app.command("list")
def list_rows(
    limit: int = typer.Option(20, "--limit", "-n", min=1, max=10_000, help="How many of the newest rows."),
) -> None:
    """Show the newest audit rows, oldest first."""

    async def body() -> None:
        async with open_store(state.db) as store:
            rows = list(reversed(await AuditLog(store.db).query(limit=limit, newest_first=True)))
        if state.json:
            emit_json([r.to_json() for r in rows])
            return
        columns = (
            Column("seq", justify="right"),
            Column("recorded", drop=2),
            Column("event"),
            Column("principal", drop=3),
            Column("tool", keep=True),
            Column("decision", drop=4),
            Column("outcome"),
            Column("ms", justify="right", drop=5),
            Column("reason", drop=1),
        )
        cells = [
            (
                str(r.seq),
                r.recorded_at.strftime("%Y-%m-%d %H:%M:%S"),
                r.event,
                r.principal or "",
                r.tool or "",
                r.decision or "",
                r.outcome or "",
                f"{r.duration_ms:.0f}" if r.duration_ms is not None else "",
                (r.reason or "")[:80],
            )
            for r in rows
        ]
        out.print(fitted_table(columns, cells, out.width, markup=False))

    run(body)
