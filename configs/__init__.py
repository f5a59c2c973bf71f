"""Shipped robot configs (YAML) and their URDFs, as package data."""
