"""Benchmarks that print figures (never timed tests): `dlzero bench infer|search|selfplay`."""
