"""Writes what the event contract's table (streaming/core/state/fields.py) gives: the JSON Schema
(streaming/core/state/event.schema.json) and the field tables of docs/events.md (between the
`<!-- contract-fields: SECTION -->` and `<!-- /contract-fields -->` markers).

    python scripts/sync_event_contract.py           # write them
    python scripts/sync_event_contract.py --check   # exit 1 if either differs (the tests do this)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streaming.core.state.fields import DOCS_SECTIONS, docs_table, schema_document  # noqa: E402

SCHEMA = ROOT / "streaming" / "core" / "state" / "event.schema.json"
DOCS = ROOT / "docs" / "events.md"


def schema_text() -> str:
    return json.dumps(schema_document(), indent=2, ensure_ascii=False) + "\n"


def docs_text(current: str) -> str:
    """docs/events.md with each marked table replaced by the table's own."""
    for section in DOCS_SECTIONS:
        pattern = re.compile(rf"(<!-- contract-fields: {section} -->\n).*?(<!-- /contract-fields -->)",
                             re.S)
        if not pattern.search(current):
            raise SystemExit(f"docs/events.md has no table marked for {section}")
        current = pattern.sub(lambda m: m.group(1) + docs_table(section) + "\n" + m.group(2),
                              current)
    return current


def main(argv: list[str]) -> int:
    wanted = {SCHEMA: schema_text(), DOCS: docs_text(DOCS.read_text())}
    stale = [path for path, text in wanted.items() if path.read_text() != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)} differs from the contract's table: run "
                  "python scripts/sync_event_contract.py")
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
