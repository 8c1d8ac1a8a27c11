"""The engine campaigns run on: a bench plan executed round by round, calibration, the
distribution pass, release runs, reruns and the sweep's racer. Commands compose these; this
package never imports `commands/`."""
