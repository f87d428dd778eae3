"""Every place that names protocols reads the one registry (``decode/protocols.py``): a new protocol is one decoder
module plus one registry entry, and nothing else can disagree with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ticdc_lakehouse.decode import PROTOCOLS, make_decoder
from ticdc_lakehouse.decode.protocols import (
    ENCODABLE,
    PROTOCOLS_WITH_MISSING_TS,
    PROTOCOLS_WITH_RESOLVED_TS,
    PROTOCOLS_WITHOUT_RESOLVED_TS,
    SPECS,
    carries_resolved_ts,
    uses_resolved_ts,
)

ROOT = Path(__file__).resolve().parents[1]
NAMES = [spec.name for spec in SPECS]


def test_the_registry_names_each_protocol_once_and_every_decoder_loads():
    assert len(set(NAMES)) == len(NAMES) == len(PROTOCOLS)
    for spec in SPECS:
        decoder = make_decoder(spec.name)
        assert type(decoder) is spec.decoder_class()
        # the large-message support a spec claims is the decoder's: it reads claim-check storage or it does not
        assert hasattr(decoder, "large") == spec.claim_check, spec.name
    with pytest.raises(ValueError, match="unknown protocol 'opn'"):
        make_decoder("opn")


def test_every_encoder_writes_what_its_decoder_reads():
    from ticdc_lakehouse.core.model import RowChange
    from ticdc_lakehouse.sim.workload import Workload, encode_partitions, encoder_for

    assert ENCODABLE == ("open", "craft", "simple-json", "simple-avro")
    for name in ENCODABLE:
        workload = Workload(seed=5, partitions=1)
        workload.create_sample_tables()
        workload.transaction(1)
        records = encode_partitions(workload.new_events(), name)[0]
        decoder = make_decoder(name)
        from ticdc_lakehouse.core.model import Message

        rows = [event for offset, (key, value, _headers, _ts) in enumerate(records)
                for event in decoder.decode(Message("t", 0, offset, key, value)) if isinstance(event, RowChange)]
        assert rows, name
    with pytest.raises(ValueError, match="cannot encode protocol 'avro'"):
        encoder_for("avro")


def test_the_cli_offers_what_the_registry_holds():
    from ticdc_lakehouse.commands.cli import build_parser

    parser = build_parser()
    demo = next(action for action in parser._subparsers._group_actions[0].choices["demo"]._actions
                if action.dest == "protocol")
    assert tuple(demo.choices) == ENCODABLE


def test_preflight_accepts_every_registered_name_and_rejects_any_other():
    from ticdc_lakehouse.commands.preflight import PreflightError, check_protocol

    for name in NAMES:
        check_protocol(name, "--protocol")
    with pytest.raises(PreflightError, match="unknown protocol 'canal' .*canal-json"):
        check_protocol("canal", "--protocol")


def test_the_engine_and_the_airflow_operator_agree_on_resolved_ts_for_every_protocol():
    pytest.importorskip("airflow")
    from tests.airflow_fixture import PLUGINS  # noqa: F401 - puts plugins/ on sys.path

    from lakehouse_airflow.operators.publish import cut_metrics

    from ticdc_lakehouse.merge.engine import no_resolved_hint

    assert PROTOCOLS_WITH_RESOLVED_TS | PROTOCOLS_WITHOUT_RESOLVED_TS == set(NAMES)
    assert not PROTOCOLS_WITH_RESOLVED_TS & PROTOCOLS_WITHOUT_RESOLVED_TS
    assert PROTOCOLS_WITH_MISSING_TS <= PROTOCOLS_WITHOUT_RESOLVED_TS
    cut = (1_700_000_000_000 << 18) | 1
    for spec in SPECS:
        engine_tags = uses_resolved_ts(spec.name, "auto")
        assert engine_tags == carries_resolved_ts(spec.name) == spec.resolved_ts
        metrics = cut_metrics("orders", {"merge": {"protocol": spec.name, "previous_resolved_ts": 1,
                                                   "resolved_ts": cut}})
        assert (metrics["tag"] is not None) == engine_tags, spec.name
        hint = no_resolved_hint("orders", spec.name, ["t/0"])
        assert (spec.resolved_ts_sink_option is not None) == (f"add {spec.resolved_ts_sink_option}" in hint)


def test_no_module_spells_its_own_list_of_protocols():
    """Two or more protocol names on one line, outside the registry, is a list that will go stale."""
    quoted = re.compile("|".join(re.escape(f'"{name}"') for name in NAMES))
    offenders = []
    for folder in ("ticdc_lakehouse", "plugins", "dags", "spark_jobs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "protocols.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if len(set(quoted.findall(line))) >= 2:
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
