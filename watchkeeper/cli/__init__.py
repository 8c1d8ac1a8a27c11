"""Command line, one module per command group.

app       the parser and `main`: loads the config once, maps WatchkeeperError to one line + hint
common    consoles, progress, shared options (imports no group)
measure   setup, run, bench, sweep, soak, profiles
database  db upgrade / downgrade
nightly   digest, findings, aa
tracker   triage, review-pr
daemon    daemon, status, job run
"""
