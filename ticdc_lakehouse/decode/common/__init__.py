"""What the protocol decoders (and the test-only encoders) share: MySQL type text and TiCDC's type codes, DDL
kinds and TiDB's DDL action numbers, Go's number and string text, canonical value text, landed positions, and the
value converters several protocols' wire forms need alike (``converters``). Nothing here knows one protocol."""
