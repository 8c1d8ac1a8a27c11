"""Simulation and fault injection used by the tests and the benchmarks, never by a command:
seeded synthetic soaks (`soak_series`), the crossover's and the goodput reading's coverage
(`crossover`, `goodput`), and a TCP relay that cuts and restores a connection (`faults`).
Kept out of the stage packages, so a stage holds only what a command runs."""
