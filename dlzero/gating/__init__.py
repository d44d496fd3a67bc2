"""Gating and rating: matches between players, the gate that promotes a candidate, and ratings on an
anchored scale. Its own stage beside self-play and training; it uses the engine's search, never the
self-play or training code."""
