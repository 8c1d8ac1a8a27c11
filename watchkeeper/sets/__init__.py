"""Deliverable sets: what takes several commands in order (a sweep, its pick's ladder at the
unit's load, the soak of that unit, the nightly that guards it, check-set). A layer above
`commands/` (no command imports another), below the daemon and the CLI."""
