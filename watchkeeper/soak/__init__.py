"""Overnight soak: time-bounded closed-loop load that survives faults and loses no sample.

`loop` drives the load, `supervisor` keeps each profile's server alive, `sampler` records
resources, `spool` is the write-ahead journal in front of the database, `verdicts` judges
the stored campaign. Everything here is usable from the CLI, the daemon and tests alike.
"""
