"""BUILD runs on a fleet of workers, through procrastinate on PostgreSQL.

- `submit.py`: store a run `queued` and defer its job in one transaction; follow it to its end.
- `app.py`: the procrastinate app (its tasks and the reaper's schedule) over the store's URL.
- `jobs.py`: what a worker does with a job: claim the run, run it through the runtime's tool
  stack as the run's principal, record a cancellation or a shutdown.
- `reaper.py`: runs of workers whose heartbeat stopped: closed `failed` with the unknown outcome
  of their step, or re-queued when every call they had started was safe to repeat.
- `worker.py`: one worker process (`toolagent worker`): one runtime, many jobs, graceful shutdown.

Needs the `workers` extra (`pip install 'toolagent[workers]'`) and a PostgreSQL store.
"""

from __future__ import annotations

from .submit import follow_run, plan_from_json, plan_to_json, submit_run

__all__ = ["follow_run", "plan_from_json", "plan_to_json", "submit_run"]
