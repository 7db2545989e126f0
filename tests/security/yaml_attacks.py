"""YAML documents every loader must refuse, as data: `(name, document, words the refusal contains)`."""

from __future__ import annotations


def laughs(levels: int, width: int = 9) -> str:
    """A billion-laughs document under `toolParams`: each level repeats the one before `width` times."""
    lines = ["metadata: {name: bomb, displayName: Bomb, version: 1.0.0, type: tool}", "configuration:",
             "  tools: [supabase/execute-sql]", "  toolParams:", "    supabase/execute-sql:",
             '      l0: &l0 ["lol"]']  # fmt: skip
    for i in range(1, levels + 1):
        refs = ", ".join([f"*l{i - 1}"] * width)
        lines.append(f"      l{i}: &l{i} [{refs}]")
    return "\n".join(lines) + "\n"


#: Documents refused at load, whatever reads them (agent files, API bodies, engine config).
YAML_BOMBS: list[tuple[str, str, str]] = [
    ("billion laughs, depth 6 (600 bytes)", laughs(6), "expands to more than"),
    ("billion laughs, depth 9", laughs(9), "expands to more than"),
    ("wide aliases", "a: &a [x]\nb: [" + ", ".join(["*a"] * 2000) + "]\n", "reuses anchors"),
    ("recursive alias", "a: &a [*a]\n", "contains it"),
    ("recursive mapping", "&a {k: *a}\n", "contains it"),
    ("deep nesting", "x: " + "[" * 200 + "]" * 200 + "\n", "nested more than"),
    (
        "deep nesting via aliases",
        "".join(f"l{i}: &l{i} [{'*l' + str(i - 1) if i else 'x'}]\n" for i in range(100)),
        "nested more than",
    ),
]

#: Documents with anchors that must keep loading (anchors used a few times are legitimate YAML).
YAML_ALLOWED: list[tuple[str, str]] = [
    ("shared params", "common: &c {max_rows: 10}\nstep1: *c\nstep2: *c\n"),
    ("merge key", "base: &b {a: 1}\nchild: {<<: *b, c: 2}\n"),
    ("small laughs", laughs(2, width=3)),
]
