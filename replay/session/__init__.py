"""Sessions: `use_cassette` and the life of a cassette around a block of code.

`lifecycle` (`use_cassette`, `CassetteSession`: enter, route, wait for recordings in flight,
merge), `options` (one frozen `SessionOptions` value, checked once), `args` (what the options
become: faults, ignored hosts, speeds and clocks, imported only by the sessions that use them),
`file` (the file side of a use: load, recover, tape, save), `seen` (what a use saw), `imposed`
(what a run imposes on every session: the command line's record mode, a run's defaults, a
watcher) and `naming` (the default cassette path of a test).

This `__init__` imports nothing, so that the pytest plugin can read `naming` and `imposed`
without loading the library.
"""
