"""Protocol decoders: Kafka messages in, ``ticdc_lakehouse.core.model`` events out.

Every decoder is a small class with one method, ``decode(message) -> list[Event]``. ``decode_safely`` wraps it so
that no input can crash the pipeline: whatever goes wrong becomes a ``DecodeFailure`` naming topic, partition,
offset and the reason, and the caller routes it to the dead-letter table. The one exception is
``SourceUnavailable`` (an unreachable schema registry): not the message's fault, so it fails the run instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from ticdc_lakehouse.decode.large_messages import LargeMessageOptions
from ticdc_lakehouse.decode.protocols import PROTOCOLS, PROTOCOLS_WITH_RESOLVED_TS, spec_of
from ticdc_lakehouse.core.model import DecodeError, DecodeFailure, Event, Message, SourceUnavailable

__all__ = [
    "PROTOCOLS", "PROTOCOLS_WITH_RESOLVED_TS", "Decoder", "DecoderOptions", "decode_safely", "make_decoder",
]


@dataclass(frozen=True)
class DecoderOptions:
    """What a decoder may need beyond the bytes. Plain data, so it pickles to Spark executors."""

    schema_registry_url: Optional[str] = None
    schema_registry_config: dict[str, Any] = field(default_factory=dict)
    #: the sink's large-message handling (compression, claim-check storage): see ``large_messages``
    large_messages: LargeMessageOptions = field(default_factory=LargeMessageOptions)
    extra: dict[str, Any] = field(default_factory=dict)


class Decoder(Protocol):
    def decode(self, message: Message) -> list[Event]:
        """Decode one Kafka message into zero or more events; raise ``DecodeError`` on bad input."""


def make_decoder(protocol: str, options: Optional[DecoderOptions] = None) -> Decoder:
    """The decoder of ``protocol`` (see ``decode.protocols``); a ``ValueError`` for a name not registered."""
    return spec_of(protocol).decoder_class()(options or DecoderOptions())


def decode_safely(decoder: Decoder, message: Message) -> list[Event]:
    """Decode, turning every failure (ours or a library's) into one ``DecodeFailure`` for the dead-letter table;
    ``SourceUnavailable`` passes through (the message is not at fault: the run fails and is retried)."""
    try:
        return decoder.decode(message)
    except DecodeError as exc:
        reason = str(exc)
    except SourceUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - bad bytes must never crash the job
        reason = f"{type(exc).__name__}: {exc}"
    return [DecodeFailure(reason=reason, position=message.position(), key=message.key, value=message.value)]
