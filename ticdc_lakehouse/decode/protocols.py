"""The protocol registry: one ``ProtocolSpec`` per TiCDC protocol, and every list of protocols derived from it.

Adding a protocol is one decoder module plus one entry in ``SPECS``: the decoder lookup, the CLI's choices, the
demo's encoders, preflight's name check, the backfill DAG's ``protocol`` param, the merge engine's resolved-ts
and made-up-ts decisions and the Airflow operator's tagging all read this module (``tests/test_protocols.py``
checks each of them against it). Decoders and encoders are named as ``"module:Class"`` and imported only when
asked for, so a Spark executor loads just the protocol it decodes.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class ProtocolSpec:
    """What the rest of the lakehouse needs to know about one protocol."""

    #: the name the config (``changefeeds.<name>.protocol``), the CLI's ``--protocol`` and the README use
    name: str
    #: how the README and messages call it ("Open Protocol")
    title: str
    #: ``"module:Class"`` of the decoder; the class takes a ``DecoderOptions``
    decoder: str
    #: ``"module:Class"`` of the encoder the demo and the workload generator use (None: they cannot produce it)
    encoder: Optional[str] = None
    #: TiCDC's output carries resolved events by default (``resolved_ts = "auto"`` waits for them)
    resolved_ts: bool = True
    #: what to add to the changefeed's sink URI so TiCDC sends resolved events (when it may not by default)
    resolved_ts_sink_option: Optional[str] = None
    #: some row events carry no commit ts at all (see ``merge.made_up_ts``)
    missing_commit_ts: bool = False
    #: reads rows TiCDC moved to claim-check storage and values compressed by ``large-message-handle-compression``
    claim_check: bool = False
    #: recognises handle-key-only rows (``large-message-handle-option=handle-key-only``) and dead-letters them
    #: with a reason (completing them needs the upstream TiDB), instead of merging a partial row
    handle_key_only: bool = False

    def decoder_class(self) -> type:
        return _load(self.decoder)

    def make_encoder(self) -> Any:
        if self.encoder is None:
            raise ValueError(f"the workload cannot encode protocol {self.name!r}; it can encode "
                             f"{', '.join(ENCODABLE)}")
        return _load(self.encoder)()


def _load(target: str) -> type:
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)


_DECODE = "ticdc_lakehouse.decode."
_ENCODE = "ticdc_lakehouse.sim.encode."

SPECS: tuple[ProtocolSpec, ...] = (
    ProtocolSpec("open", "Open Protocol", _DECODE + "open_protocol:OpenProtocolDecoder",
                 _ENCODE + "open_protocol:OpenProtocolEncoder", claim_check=True, handle_key_only=True),
    ProtocolSpec("craft", "Craft", _DECODE + "craft:CraftDecoder", _ENCODE + "craft:CraftEncoder"),
    ProtocolSpec("simple-json", "Simple (JSON)", _DECODE + "simple:SimpleJsonDecoder",
                 _ENCODE + "simple:SimpleJsonEncoder", claim_check=True, handle_key_only=True),
    ProtocolSpec("simple-avro", "Simple (Avro)", _DECODE + "simple:SimpleAvroDecoder",
                 _ENCODE + "simple:SimpleAvroEncoder", claim_check=True, handle_key_only=True),
    ProtocolSpec("avro", "Confluent Avro", _DECODE + "confluent_avro:ConfluentAvroDecoder", resolved_ts=False,
                 resolved_ts_sink_option="enable-watermark=true", missing_commit_ts=True),
    ProtocolSpec("canal-json", "Canal-JSON", _DECODE + "canal_json:CanalJsonDecoder",
                 resolved_ts_sink_option="enable-tidb-extension=true", claim_check=True, handle_key_only=True),
    ProtocolSpec("debezium", "Debezium", _DECODE + "debezium:DebeziumDecoder",
                 resolved_ts_sink_option="enable-tidb-extension=true"),
)

#: protocol name -> its spec, in registry order
PROTOCOLS: dict[str, ProtocolSpec] = {spec.name: spec for spec in SPECS}
#: protocols whose TiCDC output carries resolved events by default
PROTOCOLS_WITH_RESOLVED_TS = frozenset(spec.name for spec in SPECS if spec.resolved_ts)
#: protocols whose TiCDC output carries no resolved ts by default: applied up to the landed end, per-key order
PROTOCOLS_WITHOUT_RESOLVED_TS = frozenset(spec.name for spec in SPECS if not spec.resolved_ts)
#: protocols some of whose row events carry no commit ts at all (see ``merge.made_up_ts``)
PROTOCOLS_WITH_MISSING_TS = frozenset(spec.name for spec in SPECS if spec.missing_commit_ts)
#: protocols the demo and the workload generator can encode (the ``demo --protocol`` choices)
ENCODABLE: tuple[str, ...] = tuple(spec.name for spec in SPECS if spec.encoder is not None)


def spec_of(protocol: str) -> ProtocolSpec:
    """The spec of ``protocol``; a ``ValueError`` naming the valid names for any other."""
    try:
        return PROTOCOLS[protocol]
    except KeyError:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {sorted(PROTOCOLS)}") from None


def carries_resolved_ts(protocol: Optional[str]) -> bool:
    """Whether TiCDC's output in ``protocol`` carries resolved events by default (False for a name not here)."""
    return protocol in PROTOCOLS_WITH_RESOLVED_TS


def uses_resolved_ts(protocol: str, setting: str) -> bool:
    """Whether a changefeed's cut is its global resolved ts (``auto``: unless the protocol has none by default)."""
    if setting not in ("auto", "required", "none"):
        raise ValueError(f"resolved_ts must be auto, required or none, not {setting!r}")
    if setting == "auto":
        return protocol not in PROTOCOLS_WITHOUT_RESOLVED_TS
    return setting == "required"


def resolved_ts_sink_option(protocol: str) -> Optional[str]:
    """What to add to the sink URI so TiCDC sends resolved events in ``protocol`` (None: nothing to add)."""
    spec = PROTOCOLS.get(protocol)
    return spec.resolved_ts_sink_option if spec is not None else None
