"""The package's public names are deliberate: changing them is a visible decision."""

import toolagent


def test_public_names_are_pinned() -> None:
    assert sorted(toolagent.__all__) == [
        "AgentDef", "AgentRecord", "BuildRunner", "LoadedAgent", "RunOutcome", "ToolAgentError",
        "__version__", "build", "load_path", "plan_build",
    ]
    for name in toolagent.__all__:
        assert hasattr(toolagent, name)
