"""Metrics and figures for fitted Bayesian neural networks."""
