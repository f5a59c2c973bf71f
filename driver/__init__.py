"""The asyncio runtime, safety layer, configs, MQTT teleop and command line."""
