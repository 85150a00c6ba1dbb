"""Packet kinds and profile rows are named, never retyped.

A kind written as its number (``kind == 2``) or a profile label typed again
(``"ip_route_input_slow+..."``) silently stops matching when the table it
came from changes; both are read from their one home instead
(``routelab.core.skbuff.KIND``, ``routelab.result.profile.LEDGER_ROWS``).
"""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "routelab"


def _mentions_kind(node: ast.AST) -> bool:
    return any((isinstance(n, ast.Name) and "kind" in n.id)
               or (isinstance(n, ast.Attribute) and "kind" in n.attr)
               or (isinstance(n, ast.Constant) and n.value == "kind")
               for n in ast.walk(node))


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def kind_numbers(text: str) -> list[int]:
    """Lines that compare a packet kind with, or pass ``kind=``, a bare integer."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_int(s) for s in sides) and any(_mentions_kind(s) for s in sides
                                                      if not _is_int(s)):
                out.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg == "kind" and _is_int(node.value):
            out.append(node.value.lineno)
    return sorted(out)


def test_no_packet_kind_is_written_as_a_number():
    found = {str(p.relative_to(PKG.parent)): kind_numbers(p.read_text())
             for p in sorted(PKG.rglob("*.py"))}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_kind_check_sees_a_number():
    src = ('req = (packets["kind"][:n0] == 2) & ok\nx = kind == 1\n'
           'PacketTrace.build(t, kind=1)\ny = kind == KIND["worm"]\nz = len(a) == 1\n')
    assert kind_numbers(src) == [1, 2, 3]


def test_answers_slow_path_is_the_profiles_row():
    from routelab.notebook import answers
    from routelab.result.profile import LEDGER_ROWS

    assert answers.SLOW_PATH == LEDGER_ROWS["route_slow"]
    src = (PKG / "notebook" / "answers.py").read_text()
    assert LEDGER_ROWS["route_slow"] not in src        # named, not typed again
