"""The keys of hilbot run's terminal and of the jog terminal: one key, one meaning."""

from hilbot.driver.commands.local_stop import HINT, KEYS
from hilbot.driver.teleop.publisher import JOG_COMMANDS, JOG_HELP, JOG_KEYS


def _jog_meanings() -> dict[str, str]:
    return {**{k: f"jog {v}" for k, v in JOG_KEYS.items()}, **JOG_COMMANDS, "q": "quit"}


def test_no_key_means_one_thing_in_run_and_another_in_jog():
    jog = _jog_meanings()
    both = {k: (KEYS[k].value, jog[k]) for k in KEYS.keys() & jog.keys()}
    assert all(run == jogged for run, jogged in both.values()), both


def test_space_and_e_e_stop_and_c_resets_in_both():
    jog = _jog_meanings()
    for key in (" ", "e"):
        assert KEYS[key].value == jog[key] == "estop"
    assert KEYS["c"].value == jog["c"] == "reset"
    assert jog["n"] == "enable"
    assert "e" not in (k for k, v in jog.items() if v == "enable")


def test_the_hints_name_the_keys():
    assert "space or e" in HINT and "c resets" in HINT
    assert "n enable" in JOG_HELP and "space or e e-stop" in JOG_HELP and "c reset" in JOG_HELP
