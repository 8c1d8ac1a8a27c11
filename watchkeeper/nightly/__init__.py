"""The nightly judgement: is tonight worse than before, how sure are we, and what is still open.

series        turn stored runs into per-series points (one value per run, never pooled trials)
detector      judge one night of every series against its history
changepoints  name the night a series' level moved (PELT on the run-level series)
findings      the finding lifecycle: candidate, confirmed, expired, maintainers' decisions
digest        gather what the morning digest says (rendering lives in publish.digest)

The store's queries for it live in ``store.history``; the rendering in ``publish``.
"""
