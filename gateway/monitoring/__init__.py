"""Observability of the gateway: frame records, rolling stats, system sampler, events, exporters."""
