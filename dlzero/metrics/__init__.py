"""Reporting on a run from its files (metrics.csv, ratings.csv, elo.csv): plots a person reads.

It only reads the run directory; it imports neither self-play nor training, so any role (or a
machine that only has the files) can draw them.
"""
