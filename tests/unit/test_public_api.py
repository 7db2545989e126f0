"""The package's public names are deliberate: changing them is a visible decision."""

import json
import subprocess
import sys

import pytest

import toolagent


def test_public_names_are_pinned() -> None:
    assert sorted(toolagent.__all__) == [
        "AgentDef",
        "AgentRecord",
        "BuildRunner",
        "LoadedAgent",
        "RunOutcome",
        "ToolAgentError",
        "__version__",
        "build",
        "load_path",
        "plan_build",
    ]
    for name in toolagent.__all__:
        assert hasattr(toolagent, name)


@pytest.mark.parametrize("package", ["toolagent.engine", "toolagent.agents", "toolagent.runs"])
def test_every_name_a_package_exports_loads_on_first_use(package: str) -> None:
    # In a fresh interpreter: importing the package loads none of its submodules' names until one
    # is used, and every name in `__all__` then resolves; an unknown one is an AttributeError.
    code = (
        f"import importlib, sys\nmod = importlib.import_module({package!r})\n"
        f"before = sorted(m for m in sys.modules if m.startswith({package!r} + '.'))\n"
        "missing = [n for n in mod.__all__ if getattr(mod, n, None) is None]\n"
        "try:\n    mod.no_such_name\nexcept AttributeError as exc:\n    unknown = str(exc)\n"
        "print(json.dumps([before, missing, unknown]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    before, missing, unknown = json.loads(proc.stdout)
    assert before == []
    assert missing == []
    assert unknown == f"module {package!r} has no attribute 'no_such_name'"
