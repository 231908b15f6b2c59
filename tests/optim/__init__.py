"""Tests of hypermc.optim."""
