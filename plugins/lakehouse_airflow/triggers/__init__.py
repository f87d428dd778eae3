"""Triggers (run in Airflow's triggerer): ``table_cut.TableCutTrigger``, ``kafka_lag.KafkaLagTrigger``; ``base``
holds their shared wait loop."""
