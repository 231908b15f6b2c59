"""Tests of hypermc.data."""
