"""Clients of the engines; foreign errors are converted here (STYLE.md)."""
