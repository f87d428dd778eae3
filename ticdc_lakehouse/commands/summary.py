"""The short human summary that ends ``lakehouse backfill``/``run``/``merge`` (``--format json`` prints the report).

It answers what a person checks after a run: up to which upstream moment the lake is now consistent (the cut, as
a TSO and as a time), how fast it went, what changed per table, which DDL was applied, whether anything became a
dead letter or stopped, and where the time went.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

#: the report's phase names, in run order, as the summary names them
PHASES = (("land", "land"), ("decode", "decode"), ("ddl", "DDL"), ("apply", "apply"), ("commit", "commit"))
#: DDL statements listed by the summary (the JSON report has them all)
SHOWN_DDLS = 10


def _grid(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(columns[i]), *(len(r[i]) for r in cells)) for i in range(len(columns))]
    line = lambda values: "  " + "  ".join(  # noqa: E731 - first column left, numbers right
        v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths)))
    return [line(columns)] + [line(row) for row in cells]


def _count(value: Optional[int]) -> str:
    return f"{value:,}" if value else "0"


def table_lines(tables: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Per table: the upstream row events by kind, and the rows the lake wrote and removed."""
    if not tables:
        return ["  no table changed"]
    rows = []
    for name in sorted(tables):
        entry = tables[name]
        events = entry.get("events") or {}
        rows.append((name, _count(events.get("I")), _count(events.get("U")), _count(events.get("D")),
                     _count(entry.get("written")), _count(entry.get("removed"))))
    return _grid(("table", "inserts", "updates", "deletes", "rows written", "rows removed"), rows)


def phase_line(phases: Mapping[str, float], total: float) -> str:
    parts = [f"{label} {phases[key]:.1f} s" for key, label in PHASES if key in phases]
    return f"time: {', '.join(parts)} (total {total:.1f} s)" if parts else f"time: {total:.1f} s"


def cut_time(tso: int) -> str:
    """The upstream wall-clock time of a TSO, to the millisecond: ``2026-11-01 08:00:37.822 UTC``."""
    from ticdc_lakehouse.commands.status import tso_time

    iso = tso_time(tso)
    return f"{iso[:23].replace('T', ' ')} UTC" if iso else "time unknown"


def _offset_range(item: Mapping[str, Any]) -> str:
    """A landing damage report (data loss, a quarantined segment): where it is and why."""
    return (f"{item.get('topic')}/{item.get('partition')} offsets [{item.get('start')}, {item.get('end')}): "
            f"{item.get('reason')}")


def render_summary(result: Mapping[str, Any]) -> str:
    """The summary of a pipeline result (``pipeline.backfill``/``run_cycle``/``merge``)."""
    merge = result.get("merge") or {}
    landing = result.get("landing") or {}
    phases = dict(merge.get("phases") or {})
    if landing.get("seconds"):
        phases["land"] = float(landing["seconds"])
    total = float(merge.get("seconds") or 0.0) + phases.get("land", 0.0)
    name = merge.get("changefeed") or landing.get("changefeed") or "changefeed"
    cut = merge.get("resolved_ts") or 0
    lines = []
    if landing:
        lines.append(f"{name}: landed {_count(landing.get('records'))} record(s) in {landing.get('files', 0)} "
                     f"new segment(s)")
    if cut:
        moved = "" if cut != merge.get("previous_resolved_ts") else " (unchanged: nothing new was resolved)"
        lines.append(f"{name}: consistent up to TSO {cut} ({cut_time(cut)}){moved}")
    else:
        lines.append(f"{name}: no cut yet (no resolved ts landed)")
    events = int(merge.get("events_read") or 0)
    seconds = float(merge.get("seconds") or 0.0)
    rate = f" ({events / seconds:,.0f} events/s)" if seconds > 0 and events else ""
    lines.append(f"{_count(events)} event(s) merged in {seconds:.1f} s{rate}")
    lines += table_lines(merge.get("tables") or {})
    ddls = merge.get("ddls_applied") or []
    lines.append(f"DDL applied: {len(ddls)}" + "".join(f"\n  {ddl}" for ddl in ddls[:SHOWN_DDLS])
                 + (f"\n  ... {len(ddls) - SHOWN_DDLS} more (--format json lists them)" if len(ddls) > SHOWN_DDLS else ""))
    lines.append(f"dead letters: {merge.get('dead_letters', 0)}"
                 + ("  (lakehouse status lists them)" if merge.get("dead_letters") else ""))
    for halt in merge.get("halted") or []:
        lines.append(f"HALTED {halt['table']} at DDL ts {halt['ddl_ts']}: {halt['reason']} "
                     f"(lakehouse resume {halt['table']} --skip-ddl | --retry)")
    for held in merge.get("held") or []:
        lines.append(f"HELD {held['topic']}/{held['partition']} at offset {held['offset']}: {held['error']} "
                     f"(lakehouse skip-message {held['topic']}/{held['partition']}/{held['offset']})")
    for table in merge.get("pending_tables") or []:
        lines.append(f"pending {table}: rows without a schema yet, kept for the next run")
    lines += [f"DATA LOSS {_offset_range(loss)}" for loss in landing.get("data_loss") or []]
    lines += [f"QUARANTINED landed segment {_offset_range(moved)}; moved to {moved.get('file')}"
              for moved in merge.get("quarantined") or []]
    for key, ranges in (merge.get("missing") or {}).items():
        lines.append(f"NOT LANDED {key} offsets " + ", ".join(f"[{a}, {b})" for a, b in ranges)
                     + ": merged up to the first of them only (lakehouse status)")
    lines.append(phase_line(phases, total))
    return "\n".join(lines)
