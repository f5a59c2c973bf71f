"""Teleop settings: defaults, validation and the environment (pure)."""

import pydantic
import pytest

from hilbot.driver.teleop import TeleopSettings


def test_settings_defaults_and_validation():
    s = TeleopSettings()
    assert s.topic_prefix("omx") == "hilbot/omx" and s.qos == 0 and s.embedded_port == 1883
    assert TeleopSettings(prefix="lab/arm1").topic_prefix("omx") == "lab/arm1"
    for bad in ({"prefix": "a/#"}, {"prefix": "/a"}, {"reconnect_min_s": 9.0}, {"qos": 3},
                {"colour": "red"}, {"tls": {"cert_file": "c.pem"}}):  # fmt: skip
        with pytest.raises(pydantic.ValidationError):
            TeleopSettings.model_validate(bad)
    with pytest.raises(pydantic.ValidationError):
        TeleopSettings().state_rate_hz = 5  # frozen


def test_environment_overrides_the_config():
    s = TeleopSettings(username="cfg", password="cfg-secret").with_environment(
        {
            "HILBOT_MQTT_PASSWORD": "env-secret",
            "HILBOT_MQTT_CA_FILE": "/etc/ca.pem",
            "HILBOT_MQTT_TLS_INSECURE": "yes",
        }
    )
    assert s.username == "cfg" and s.password.get_secret_value() == "env-secret"
    assert str(s.tls.ca_file) == "/etc/ca.pem" and s.tls.insecure is True
    assert "env-secret" not in repr(s)
    with pytest.raises(ValueError, match="HILBOT_MQTT_TLS_INSECURE"):
        TeleopSettings().with_environment({"HILBOT_MQTT_TLS_INSECURE": "maybe"})


def test_exported_names_exist():
    import hilbot.driver.teleop as teleop

    assert all(hasattr(teleop, name) for name in teleop.__all__)
    assert callable(teleop.serve)
