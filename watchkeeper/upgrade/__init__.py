"""Upgrade watch: which llama.cpp releases exist, is the next one safe, which one regressed."""
