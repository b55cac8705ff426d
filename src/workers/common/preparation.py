"""Where a worker cell's untimed preparation goes, on the worker's side of the protocol.

crossbench records a cell's ``preparation_s`` whole and adds to its decisions the two parts it sees
(``worker_start=``: the process's spawn to its hello; ``worker_prepare=``: the ``prepare`` request). A
worker breaks its own share down with these tokens, the same in every worker:

* ``setup=S.SSs(untimed: model, inputs)``: the cell's model, inputs and optimizer, before its compile
  (the compile has its own ``compile=`` token);
* ``startup=import S.SSs + device S.SSs(untimed, in hello)``: the framework's import, then the device's
  first use (its context and libraries), in hello; told by the process's first cell alone, since a
  worker that serves several cells (engine.worker_per_cell = false) starts once;
* ``compiler_setup=S.SSs(untimed: ...)``: what a compiling worker does for its compile outside the
  ``compile=`` clock: the compiler's imports, flags and persistent cache set before it, the cache's entries
  counted before and after (the H200's pytorch-compile cells spent 3.9-5.8 s of their prepare request
  outside setup and compile: bench/results/2026-12-09);
* ``prepare=S.SSs(untimed: the worker's whole prepare request)``: from the request's arrival to the
  session's being ready, told by the protocol (protocol.py) after the worker's own tokens. Less setup,
  compile and compiler_setup, it is what the adapter does beside them; crossbench's ``worker_prepare=``
  less it is the request's way there and back.
"""
import time


class StartupClock:
    """Times hello: started at its beginning, `imported()` once the framework is imported, `seconds()` at
    its end: (import, device) [s]."""

    def __init__(self):
        self.start = time.perf_counter()
        self.imported_at = None

    def imported(self):
        self.imported_at = time.perf_counter()

    def seconds(self):
        imported = self.imported_at if self.imported_at is not None else self.start
        return imported - self.start, time.perf_counter() - imported


def describe(setup_s, startup):
    """The decisions' tokens for a cell's setup [s] and, in its process's first cell, the startup
    ((import, device) [s], or None)."""
    text = f" setup={setup_s:.2f}s(untimed: model, inputs)"
    if startup is not None:
        text += f" startup=import {startup[0]:.2f}s + device {startup[1]:.2f}s(untimed, in hello)"
    return text


def describe_compiler_setup(seconds, what):
    """The decisions' token for a compile's set-up outside its clock [s]; `what` says what it covers."""
    return f" compiler_setup={seconds:.2f}s(untimed: {what})"


def describe_prepare(prepare_s):
    """The decisions' token for the worker's whole `prepare` request [s] (protocol.py appends it)."""
    return f" prepare={prepare_s:.2f}s(untimed: the worker's whole prepare request)"
