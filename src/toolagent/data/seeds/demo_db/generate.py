"""Write the demo database's CSV files (deterministic: the same files on every run).

Run `python seeds/demo_db/generate.py` after changing it and commit the CSV files; the
Supabase MCP server rebuilds its embedded copy when they change. Timestamps are UTC, written
as `YYYY-MM-DD HH:MM:SS`; an empty field is NULL.

The data: 6 organizations, 240 users, 2,400 agent conversations (January 2025 to
November 2026, denser towards the end, a few very long ones), 10 KPI metrics and one value
per metric, organization and month.
"""

from __future__ import annotations

import csv
import random
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20250101

START = datetime(2025, 1, 1)
END = datetime(2026, 11, 20, 23, 59, 59)
USERS_UNTIL = datetime(2026, 10, 31, 23, 59, 59)

ORGANIZATIONS = ["demo", "acme", "globex", "initech", "umbrella", "hooli"]
ORG_WEIGHTS = [4, 3, 2, 2, 1, 1]
ROLES = ["admin", "member", "viewer"]
ROLE_WEIGHTS = [15, 60, 25]
PLANS = ["free", "pro", "team", "enterprise"]
PLAN_WEIGHTS = [35, 30, 25, 10]
FIRST_NAMES = """Ada Alan Barbara Brian Carol Chen Dana Diego Elena Emeka Fatima Grace Hana Ivan Jia
Jonas Kiran Lena Luis Maya Mei Nadia Noah Olga Omar Priya Quinn Ravi Sara Sofia Tariq Uma Vera
Wei Yara Zoe""".split()
LAST_NAMES = """Adams Baker Costa Diaz Evans Fischer Garcia Hughes Ito Jensen Khan Lopez Moreau
Nakamura Okafor Patel Quist Rossi Silva Tanaka Ueda Varga Weber Xu Young Zimmer""".split()

AGENTS: dict[str, list[str]] = {
    "supabase-agent": ["Weekly signups report", "Schema walkthrough", "Churn analysis", "Revenue by plan"],
    "support-bot": ["Password reset help", "Refund request", "Login problem", "Invoice question"],
    "sales-assistant": ["Enterprise pricing inquiry", "Demo scheduling", "Contract renewal"],
    "research-agent": ["Competitor landscape", "Market sizing", "Literature review"],
    "onboarding-guide": ["Workspace setup", "Inviting teammates", "First agent tutorial"],
    "billing-helper": ["Plan upgrade", "Payment method update", "Usage overage question"],
}
AGENT_WEIGHTS = [5, 6, 3, 2, 3, 2]
STATUSES = ["completed", "failed", "abandoned"]
STATUS_WEIGHTS = [74, 13, 13]

#: name, description, unit, category, base value, monthly trend (fraction), noise (fraction)
METRICS = [
    ("monthly_active_users", "Distinct users active in the month", "users", "engagement", 420, 0.04, 0.06),
    ("conversations_started", "Agent conversations started in the month", "count", "engagement", 900, 0.05, 0.08),
    (
        "conversation_success_rate",
        "Share of conversations completed successfully",
        "percent",
        "quality",
        78,
        0.004,
        0.03,
    ),
    ("avg_response_time_ms", "Mean agent response latency", "ms", "performance", 1450, -0.015, 0.07),
    ("tickets_resolved", "Support tickets resolved by agents", "count", "quality", 310, 0.03, 0.1),
    ("revenue", "Recognized revenue", "usd", "finance", 52000, 0.035, 0.05),
    ("churn_rate", "Share of paying customers lost in the month", "percent", "finance", 3.2, -0.01, 0.15),
    ("nps", "Net promoter score", "score", "satisfaction", 31, 0.01, 0.12),
    ("csat", "Customer satisfaction (1-5)", "score", "satisfaction", 4.1, 0.002, 0.03),
    ("tokens_used", "LLM tokens consumed (millions)", "millions", "cost", 38, 0.06, 0.09),
]
ORG_SCALE = {"demo": 1.0, "acme": 1.6, "globex": 0.8, "initech": 0.6, "umbrella": 1.2, "hooli": 0.45}


def _ts(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S")


def _ramped(rng: random.Random, start: datetime, end: datetime, growth: float) -> datetime:
    """A moment between start and end; growth > 0 makes later moments likelier (activity grows)."""
    span = (end - start).total_seconds()
    return start + timedelta(seconds=int(span * rng.random() ** (1 / (1 + growth))))


def _users(rng: random.Random) -> list[dict[str, object]]:
    drafts: list[dict[str, object]] = []
    for _ in range(240):
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        drafts.append(
            {
                "first": first,
                "last": last,
                "organization_slug": rng.choices(ORGANIZATIONS, ORG_WEIGHTS)[0],
                "role": rng.choices(ROLES, ROLE_WEIGHTS)[0],
                "plan": rng.choices(PLANS, PLAN_WEIGHTS)[0],
                "created_at": _ramped(rng, START, USERS_UNTIL, 0.3),
            }
        )
    drafts.sort(key=lambda d: str(d["created_at"]))  # ids follow sign-up order
    rows: list[dict[str, object]] = []
    owners: set[object] = set()
    for user_id, d in enumerate(drafts, start=1):
        org = d["organization_slug"]
        rows.append(
            {
                "id": user_id,
                "email": f"{str(d['first']).lower()}.{str(d['last']).lower()}{user_id}@{org}.example",
                "full_name": f"{d['first']} {d['last']}",
                "organization_slug": org,
                "role": "owner" if org not in owners else d["role"],  # each organization's first user owns it
                "plan": d["plan"],
                "created_at": d["created_at"],
            }
        )
        owners.add(org)
    return rows


def _conversations(rng: random.Random, users: list[dict[str, object]]) -> list[dict[str, object]]:
    agents = list(AGENTS)
    rows: list[dict[str, object]] = []
    for conv_id in range(1, 2401):
        user = rng.choice(users)
        created = user["created_at"]
        assert isinstance(created, datetime)
        agent = rng.choices(agents, AGENT_WEIGHTS)[0]
        started = _ramped(rng, max(created, START), END, 0.0)
        if started > END - timedelta(days=21) and rng.random() < 0.3:
            status = "active"
        else:
            status = rng.choices(STATUSES, STATUS_WEIGHTS)[0]
        messages = max(1, int(rng.gauss(14, 7)))
        if status == "abandoned":
            messages = rng.randint(1, 6)
        if rng.random() < 0.01:
            messages = rng.randint(150, 400)  # a few runaway conversations
        ended = None if status == "active" else started + timedelta(minutes=rng.randint(2, 12) + 2 * messages)
        rows.append(
            {
                "id": conv_id,
                "user_id": user["id"],
                "organization_slug": user["organization_slug"],
                "agent_slug": agent,
                "title": rng.choice(AGENTS[agent]),
                "status": status,
                "message_count": messages,
                "started_at": started,
                "ended_at": ended,
                "created_at": started,
            }
        )
    rows.sort(key=lambda r: (str(r["started_at"]), int(str(r["id"]))))  # ids follow start order
    for new_id, row in enumerate(rows, start=1):
        row["id"] = new_id
    return rows


def _kpis(rng: random.Random) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    metrics: list[dict[str, object]] = []
    data: list[dict[str, object]] = []
    months = [(2025 + (m // 12), m % 12 + 1) for m in range(23)]  # 2025-01 .. 2026-11
    for metric_id, (name, description, unit, category, base, trend, noise) in enumerate(METRICS, start=1):
        metrics.append({"id": metric_id, "name": name, "description": description, "unit": unit, "category": category})
        scaled = unit not in ("percent", "score")
        for org in ORGANIZATIONS:
            scale = ORG_SCALE[org] if scaled else 1.0
            for index, (year, month) in enumerate(months):
                value = base * scale * (1 + trend) ** index * (1 + rng.gauss(0, noise))
                if name == "avg_response_time_ms" and org == "globex" and (year, month) == (2026, 3):
                    value *= 4  # an incident: one clear outlier
                data.append(
                    {
                        "id": len(data) + 1,
                        "metric_id": metric_id,
                        "organization_slug": org,
                        "value": f"{value:.2f}",
                        "recorded_at": datetime(year, month, 1) + timedelta(days=rng.randint(0, 2), hours=6),
                    }
                )
    return metrics, data


def _write(name: str, rows: list[dict[str, object]]) -> None:
    with open(HERE / f"{name}.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {k: _ts(v) if isinstance(v, datetime) else ("" if v is None else v) for k, v in row.items()}
            )


def main() -> None:
    """Write users.csv, agent_conversations.csv, kpi_metrics.csv and kpi_data.csv."""
    rng = random.Random(SEED)
    users = _users(rng)
    conversations = _conversations(rng, users)
    metrics, data = _kpis(rng)
    _write("users", users)
    _write("agent_conversations", conversations)
    _write("kpi_metrics", metrics)
    _write("kpi_data", data)


if __name__ == "__main__":
    main()
