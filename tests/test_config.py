"""Configuration: defaults under LAKEHOUSE_HOME, the file, environment overrides, masked secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from ticdc_lakehouse.runtime.config import load_settings
from ticdc_lakehouse.core.redaction import mask_uri_password


def test_defaults_live_under_lakehouse_home(tmp_path):
    settings = load_settings(env={"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": ""})
    assert settings.catalog_name == "lake"
    assert settings.catalog_uri == f"jdbc:sqlite:{tmp_path / 'catalog.db'}"
    assert settings.warehouse == str(tmp_path / "warehouse")
    assert settings.landing_path == tmp_path / "landing"
    assert settings.changefeed().name == "default" and settings.changefeed().protocol == "open"


def test_file_then_environment_override(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(
        '[catalog]\nuri = "jdbc:postgresql://db:5432/lake"\n'
        '[changefeeds.shop]\nprotocol = "craft"\ntopics = ["t1", "t2"]\n'
        '[tables."shop.orders"]\nwrite_mode = "copy-on-write"\n'
    )
    env = {
        "LAKEHOUSE_HOME": str(tmp_path),
        "LAKEHOUSE_SPARK_MASTER": "spark://m:7077",
        "LAKEHOUSE__MERGE__BUCKET_COUNT": "8",
        "LAKEHOUSE_CATALOG_PASSWORD": "s3cret",
    }
    settings = load_settings(config, env=env)
    assert settings.catalog_uri == "jdbc:postgresql://db:5432/lake"
    assert settings.spark.master == "spark://m:7077"
    assert settings.merge.bucket_count == 8
    assert settings.changefeed("shop").topics == ("t1", "t2")
    assert settings.changefeed().protocol == "craft"
    assert settings.table_option("shop", "orders", "write_mode") == "copy-on-write"
    assert settings.table_option("shop", "other", "write_mode") == "merge-on-read"
    assert settings.table_layout("shop", "orders") == ("copy-on-write", 8)  # what a new lake table gets
    assert settings.table_layout("shop", "other") == ("merge-on-read", 8)
    assert "s3cret" not in str(settings.masked())


def test_passwords_in_uris_are_masked():
    assert mask_uri_password("postgresql://u:pw@h/db") == "postgresql://u:***@h/db"
    assert (
        mask_uri_password("jdbc:postgresql://h/db?user=u&password=pw") == "jdbc:postgresql://h/db?user=u&password=***"
    )


def test_conf_file_in_repo_parses():
    root = Path(__file__).resolve().parents[1]
    settings = load_settings(root / "conf" / "lakehouse.toml", env={"LAKEHOUSE_HOME": "/tmp/x"})
    assert settings.catalog_name == "lake"


def test_secrets_come_from_the_environment_and_are_masked(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(
        '[changefeeds.shop]\nbootstrap_servers = "k:9093"\n'
        '[changefeeds.shop.kafka]\n"security.protocol" = "SASL_SSL"\n"sasl.username" = "svc"\n'
        '"sasl.password" = "${KAFKA_PW}"\n'
    )
    settings = load_settings(config, env={"LAKEHOUSE_HOME": str(tmp_path), "KAFKA_PW": "t0psecret"})
    assert settings.changefeed("shop").kafka["sasl.password"] == "t0psecret"
    masked = str(settings.masked())
    assert "t0psecret" not in masked and "SASL_SSL" in masked

    with pytest.raises(KeyError, match="KAFKA_PW"):
        load_settings(config, env={"LAKEHOUSE_HOME": str(tmp_path)})


def test_large_message_settings_of_a_changefeed(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[changefeeds.shop]\nlarge_message_compression = "LZ4"\n'
                      'claim_check_storage_uri = "s3://claims/shop?endpoint=http://minio:9000&access-key=AK'
                      '&secret-access-key=${CLAIM_SECRET}"\n')
    settings = load_settings(config, env={"LAKEHOUSE_HOME": str(tmp_path), "CLAIM_SECRET": "hunter2"})
    options = settings.changefeed("shop").large_messages
    assert options.compression == "lz4" and options.claim_check_storage_uri.endswith("secret-access-key=hunter2")
    shown = str(settings.masked())
    assert "hunter2" not in shown and "access-key=***" in shown
    assert settings.changefeed("other").large_messages.compression == "none"
    config.write_text('[changefeeds.shop]\nlarge_message_compression = "zstd"\n')
    with pytest.raises(ValueError, match="changefeed 'shop': large_message_compression must be one of"):
        load_settings(config, env={"LAKEHOUSE_HOME": str(tmp_path)})


def test_the_kafka_timeout_of_landing_is_a_setting_checked_where_it_is_read(tmp_path):
    """``landing.kafka_timeout_seconds``: 60 by default, from the file or the environment; a value that is no
    number of seconds fails the landing naming the key (the broker-down test shows it ends a landing)."""
    settings = load_settings(env={"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": ""})
    assert settings.landing.kafka_timeout_s == 60.0
    env = {"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": "", "LAKEHOUSE__LANDING__KAFKA_TIMEOUT_SECONDS": "5"}
    assert load_settings(env=env).landing.kafka_timeout_s == 5.0
    config = tmp_path / "lakehouse.toml"
    config.write_text("[landing]\nkafka_timeout_seconds = 0\n")
    with pytest.raises(ValueError, match=r"landing\.kafka_timeout_seconds must be a number of seconds above 0"):
        load_settings(config, env={"LAKEHOUSE_HOME": str(tmp_path)}).landing.kafka_timeout_s


@pytest.mark.parametrize("document, env, message", [
    ("", {"LAKEHOUSE__LANDING__KAFKA_TIMEOUT_SECONDS": "abc"}, "landing.kafka_timeout_seconds: 'abc' is not a number"),
    ("[merge]\nlock_timeout_seconds = true\n", {}, "merge.lock_timeout_seconds: True is not a number"),
    ("[merge]\nparallel_tables = 2.5\n", {}, "merge.parallel_tables: 2.5 is not a whole number"),
    ("", {"LAKEHOUSE__MERGE__BUCKET_COUNT": "many"}, "merge.bucket_count: 'many' is not a whole number"),
    ('[tables."app.t"]\nbucket_count = "x"\n', {}, 'tables."app.t".bucket_count: \'x\' is not a whole number'),
    ("[landing]\naccept_data_loss = 3\n", {}, "landing.accept_data_loss: 3 is not true or false"),
    ("", {"LAKEHOUSE__SPARK__CLASS_ARCHIVE": "ture"},
     "spark.class_archive: 'ture' is not true or false (1, true, yes, on / 0, false, no, off)"),
    ("[changefeeds.shop]\nclaim_check_raw_value = \"flase\"\n", {},
     "changefeeds.shop.claim_check_raw_value: 'flase' is not true or false (1, true, yes, on / 0, false, no, off)"),
    ('[catalog]\nname = ["a"]\n', {}, "catalog.name: expected a string, not ['a']"),
])
def test_a_value_of_the_wrong_kind_fails_naming_its_key(tmp_path, document, env, message):
    """Every setting's value is converted in one place, which names the key of a value it cannot take: not
    Python's bare "could not convert string to float", and no TOML ``true`` taken as 1 second or 2.5 as 2."""
    from ticdc_lakehouse.runtime.config import ConfigError

    config = tmp_path / "lakehouse.toml"
    config.write_text(document)
    with pytest.raises(ConfigError) as failure:
        load_settings(config, env={"LAKEHOUSE_HOME": str(tmp_path), **env})
    assert str(failure.value) == message


def test_numbers_from_the_environment_and_whole_floats_are_taken_exactly(tmp_path):
    config = tmp_path / "lakehouse.toml"
    config.write_text("[merge]\nparallel_tables = 3.0\n")
    settings = load_settings(config, env={"LAKEHOUSE_HOME": str(tmp_path),
                                          "LAKEHOUSE__MERGE__STAGED_MIN_ROWS": " 449000000000000001 ",
                                          "LAKEHOUSE__MERGE__LOCK_TIMEOUT_SECONDS": "",
                                          "LAKEHOUSE__LANDING__ACCEPT_DATA_LOSS": "yes"})
    assert settings.merge.parallel_tables == 3 and isinstance(settings.merge.parallel_tables, int)
    assert settings.merge.staged_min_rows == 449000000000000001  # no float on the way
    assert settings.merge.lock_timeout_seconds == 0.0 and settings.landing.accept_data_loss is True
