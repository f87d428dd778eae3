"""Protocol encoders: model events in, Kafka ``(key, value)`` bytes out, exactly as TiCDC writes them.

They exist so that the demo workload generator, the benchmarks and the tests can produce real protocol bytes
without a TiDB cluster. Each protocol module has one encoder class with ``encode(event) -> (key, value)`` (one
event per message; ``key`` is None for protocols without a Kafka key); protocols that batch rows also offer
``encode_batch(events)``. Encoders read the model's canonical values and type descriptors, so whatever a
decoder produces can be encoded again.
"""
