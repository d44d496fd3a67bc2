"""A run's progress from its files: the progress plot (metrics.csv, ratings.csv, elo.csv) and the
loop's timeline (timeline.csv: where the time went).

It imports neither self-play nor training, so any role (or a machine that only has the files) can
draw the plot; the loop writes the timeline.
"""
