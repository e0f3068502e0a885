"""Evaluation: data sets, metrics and benchmark runners that write reports."""
