"""Sensors: ``kafka_lag.KafkaLagSensor`` (records waiting in Kafka, or the landing caught up) and
``table_cut.TableCutSensor`` (a lake table consistent up to a moment); both can defer to the triggerer."""
