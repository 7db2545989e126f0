"""Template rendering is bounded: every attack in `template_attacks.py` ends in a TemplateError."""

from __future__ import annotations

import anyio
import pytest

from toolagent.errors import TemplateError
from toolagent.interpolation import ParamsTemplate, Template, TemplateLimits

from .template_attacks import ANGLE_TEXT, PAYLOAD, TEMPLATE_ATTACKS

pytestmark = pytest.mark.timeout(60)

CONTEXT = {"payload": PAYLOAD, "metadata": {}, "steps": {}, "previous": {}}


@pytest.mark.parametrize(("source", "needle"), TEMPLATE_ATTACKS)
def test_attack_ends_in_a_template_error_naming_the_parameter(source: str, needle: str) -> None:
    with pytest.raises(TemplateError) as info:
        params = ParamsTemplate.parse({"sql": source}, where="toolParams.db/run")
        params.render(CONTEXT)
    assert needle in info.value.message
    assert "toolParams.db/run.sql" in str(info.value)


def test_a_render_that_runs_too_long_stops_at_its_time_bound() -> None:
    slow = "{% for a in payload.list %}{% for b in payload.list %}{{ payload.mid|replace('z', 'q')|length }}{% endfor %}{% endfor %}"
    with pytest.raises(TemplateError, match="time_s"):
        Template.parse(slow).render(CONTEXT, limits=TemplateLimits(time_s=0.2, max_output_chars=10**9))


@pytest.mark.anyio
async def test_render_async_keeps_the_event_loop_free() -> None:
    slow = "{% for a in payload.list %}{% for b in payload.list %}{{ payload.mid|replace('z', 'q')|length }}{% endfor %}{% endfor %}"
    order: list[str] = []

    async def render() -> None:
        with pytest.raises(TemplateError, match="time_s"):
            await Template.parse(slow).render_async(CONTEXT, limits=TemplateLimits(time_s=0.5, max_output_chars=10**9))
        order.append("render ended")

    async def other() -> None:
        await anyio.sleep(0.01)
        order.append("loop served another task")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(render)
            tg.start_soon(other)
    assert order == ["loop served another task", "render ended"]


@pytest.mark.anyio
async def test_params_render_async_gives_the_same_result() -> None:
    params = ParamsTemplate.parse({"q": "{{payload.x}}", "n": "<<payload.n>>", "k": 1})
    assert await params.render_async(CONTEXT) == params.render(CONTEXT) == {"q": "abcdefghij", "n": 10, "k": 1}


@pytest.mark.parametrize(("text", "rendered"), ANGLE_TEXT)
def test_angle_brackets_that_are_not_references_stay_text(text: str, rendered: str) -> None:
    params = ParamsTemplate.parse({"sql": text})
    assert params.render(CONTEXT) == {"sql": rendered}


def test_ordinary_templates_are_unaffected() -> None:
    params = ParamsTemplate.parse({
        "q": "{% for t in payload.list[:3] %}{{ t }},{% endfor %}",
        "s": "{{ payload.x|upper ~ '-' ~ payload.n * 3 }}",
        "p": "{{ 2 ** 64 }}",
    })  # fmt: skip
    assert params.render(CONTEXT) == {"q": "0,1,2,", "s": "ABCDEFGHIJ-30", "p": 18446744073709551616}
