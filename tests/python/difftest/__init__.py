"""Differential testing of strata against PyTorch over the op database.

test_differential.py draws inputs with hypothesis for every OpInfo that has a
torch counterpart, runs the op in both libraries and compares result dtypes,
shapes and values (per-dtype tolerances, NaN positions equal) and, when one
raises, the category of the exception. See docs/DESIGN.md ("Differential
testing") for the families, the CI profile and the allow-list.
"""
