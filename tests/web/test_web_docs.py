"""The settings table of docs/guide/web_shell.md is the dataclass: every field, with its default."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from concept_grounding.web.limits import WebLimits

DOC = Path(__file__).resolve().parents[2] / "docs" / "guide" / "web_shell.md"


def test_the_settings_table_lists_every_field_with_its_default():
    rows = dict(re.findall(r"^\| `(\w+)` \| (\d+) \|", DOC.read_text(), flags=re.MULTILINE))
    assert rows == {f.name: str(f.default) for f in fields(WebLimits)}
