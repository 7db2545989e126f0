-- The Supabase demo database (PostgreSQL dialect; the embedded SQLite copy runs it as is).
-- Rows come from the CSV files next to this one; generate.py rewrites them deterministically.

CREATE TABLE users (
    id integer PRIMARY KEY,
    email text NOT NULL UNIQUE,
    full_name text NOT NULL,
    organization_slug text NOT NULL,
    role text NOT NULL,
    plan text NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE agent_conversations (
    id integer PRIMARY KEY,
    user_id integer NOT NULL REFERENCES users (id),
    organization_slug text NOT NULL,
    agent_slug text NOT NULL,
    title text NOT NULL,
    status text NOT NULL CHECK (status IN ('active', 'completed', 'failed', 'abandoned')),
    message_count integer NOT NULL,
    started_at timestamptz NOT NULL,
    ended_at timestamptz,
    created_at timestamptz NOT NULL
);

CREATE TABLE kpi_metrics (
    id integer PRIMARY KEY,
    name text NOT NULL UNIQUE,
    description text NOT NULL,
    unit text NOT NULL,
    category text NOT NULL
);

CREATE TABLE kpi_data (
    id integer PRIMARY KEY,
    metric_id integer NOT NULL REFERENCES kpi_metrics (id),
    organization_slug text NOT NULL,
    value numeric NOT NULL,
    recorded_at timestamptz NOT NULL
);
