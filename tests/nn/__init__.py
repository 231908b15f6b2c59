"""Tests of hypermc.nn."""
